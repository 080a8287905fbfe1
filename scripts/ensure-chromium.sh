#!/usr/bin/env bash
# Make sure Chromium is there for the documentation's screenshot check
# (scripts/docs_screens.py, run by scripts/test.sh: the built site in headless
# Chromium at 1280 and 390 px).
#
#     bash scripts/ensure-chromium.sh
#
# Exits 0 when `chromium` is on PATH.  Otherwise, when running as root on a system
# with apt-get, installs Debian's chromium package; elsewhere it says what to install
# and exits 1.  scripts/test.sh then skips the check - except under CI=true, where it
# fails.
set -euo pipefail

say() {
    printf '%s\n' "$*" >&2
}

if command -v chromium >/dev/null 2>&1; then
    say "==> $(chromium --version 2>/dev/null) at $(command -v chromium)"
    exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "error: the docs screenshot check needs Chromium, and it was not found."
    say "On Debian 12, as root:  apt-get update && apt-get install -y chromium"
    exit 1
fi

say "==> installing chromium with apt-get (for the docs screenshot check)"
apt_get="$(dirname "$0")/apt-get.sh"  # waits for any other apt-get
bash "$apt_get" update -qq
bash "$apt_get" install -y -qq --no-install-recommends chromium >/dev/null
hash -r
if ! command -v chromium >/dev/null 2>&1; then
    say "error: chromium is installed but not on PATH."
    exit 1
fi
say "==> $(chromium --version 2>/dev/null)"
