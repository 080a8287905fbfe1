#!/usr/bin/env bash
# Make sure Node.js and npm are there for tests/test_stompjs_interop.py (it runs
# @stomp/stompjs under Node against the embedded broker; tests/js pins its packages).
#
#     bash scripts/ensure-node.sh
#
# Exits 0 when `node` and `npm` are on PATH.  Otherwise, when running as root on a
# system with apt-get (Debian 12: nodejs 18, npm 9), installs the nodejs and npm
# packages; elsewhere it says what to install and exits 1.  The stompjs tests skip
# without node - except under CI=true, where they fail.
set -euo pipefail

say() {
    printf '%s\n' "$*" >&2
}

node_ok() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1
}

if node_ok; then
    say "==> node $(node --version) and npm $(npm --version 2>/dev/null) at $(command -v node)"
    exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "error: the stompjs interop tests need Node.js and npm, and they were not found."
    say "On Debian 12, as root:  apt-get update && apt-get install -y nodejs npm"
    exit 1
fi

say "==> installing nodejs and npm with apt-get (for the stompjs interop tests)"
apt_get="$(dirname "$0")/apt-get.sh"  # waits for any other apt-get
bash "$apt_get" update -qq
bash "$apt_get" install -y -qq --no-install-recommends nodejs npm >/dev/null
hash -r
if ! node_ok; then
    say "error: nodejs and npm are installed but node or npm is still not on PATH."
    exit 1
fi
say "==> node $(node --version) and npm $(npm --version 2>/dev/null)"
