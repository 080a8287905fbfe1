#!/usr/bin/env bash
# Install the Debian 12 broker packages the start-*.sh scripts need.  Idempotent:
# does nothing (and skips apt-get update) when they are already installed.
#   usage: install-brokers.sh [rabbitmq] [activemq]      (default: both)
# Needs root (or passwordless sudo) and the Debian package mirror; exit 2 without
# apt-get, 4 without root, 1 when apt-get fails (3 attempts).  Packages are installed
# with --no-install-recommends; their services are NOT started (the start-*.sh
# scripts run private, loopback-only instances instead).
set -euo pipefail
BROKER_NAME=install
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/brokers/lib.sh
. "$HERE/lib.sh"

want=("$@"); [ ${#want[@]} -gt 0 ] || want=(rabbitmq activemq)
pkgs=()
for w in "${want[@]}"; do
    case "$w" in
        rabbitmq) pkg=rabbitmq-server ;;
        activemq) pkg=activemq ;;
        *) die 64 "unknown broker '$w' (rabbitmq|activemq)" ;;
    esac
    if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
        log "$pkg already installed ($(dpkg-query -W -f='${Version}' "$pkg"))"
    else
        pkgs+=("$pkg")
    fi
done
[ ${#pkgs[@]} -gt 0 ] || exit 0

if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
    die 2 "apt-get not found: these scripts install the Debian 12 packages rabbitmq-server and activemq"
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    sudo -n true 2>/dev/null || die 4 "installing ${pkgs[*]} needs root (or passwordless sudo)"
    SUDO="sudo -n env DEBIAN_FRONTEND=noninteractive"   # sudo resets the environment
fi
export DEBIAN_FRONTEND=noninteractive

# Debian's postinst would start the system-wide services (rabbitmq-server listens on
# 0.0.0.0 by default).  Docker-style images ship /usr/sbin/policy-rc.d (exit 101)
# which prevents that; if it is missing, put one in place for the install only.
made_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# temporary, from install-brokers.sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
    trap '[ -n "$made_policy" ] && $SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi

t0=$(now_ms)
# apt-get.sh waits for any other apt-get on the machine (its locks), up to 300 s.
apt_get=(bash "$HERE/../apt-get.sh")
apt_opts=(-y -q --no-install-recommends)
lists_fresh() { [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -360 -print -quit 2>/dev/null)" ]; }
if ! lists_fresh; then
    log "apt-get update (package lists missing or older than 6 h)"
    $SUDO "${apt_get[@]}" update -q >&2 || log "apt-get update failed; trying the install anyway"
fi
for attempt in 1 2 3; do
    log "apt-get install ${pkgs[*]} (attempt $attempt)"
    if $SUDO "${apt_get[@]}" install "${apt_opts[@]}" "${pkgs[@]}" >&2; then break; fi
    [ "$attempt" = 3 ] && die 1 "apt-get install ${pkgs[*]} failed 3 times"
    sleep $((attempt * 5))
    $SUDO "${apt_get[@]}" update -q >&2 || true
done
log "installed ${pkgs[*]} in $(( $(now_ms) - t0 ))ms"
