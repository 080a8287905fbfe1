#!/usr/bin/env bash
# Make sure the C toolchain is there for the accelerated build (the native fast
# path, the native twins stomp_proto/_*_native.pyx: Cython writes C, a C compiler builds them against
# the headers of the Python that will import it).
#
#     bash scripts/ensure-toolchain.sh [PYTHON]
#
# Exits 0 when a C compiler (gcc or cc) is on PATH and PYTHON (default python3) has
# its Python.h.  Otherwise, when running as root on a system with apt-get, installs
# Debian's gcc and python3-dev packages (python3-dev is the headers of Debian's own
# python3; an interpreter built elsewhere, such as pyenv's, ships its headers itself);
# elsewhere it says what to install and exits 1.  scripts/test.sh runs it before the
# accelerated build, which it then skips - except under CI=true, where it fails.
set -euo pipefail

PYTHON=${1:-python3}

say() {
    printf '%s\n' "$*" >&2
}

compiler() {
    command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1
}

headers() {
    "$PYTHON" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
}

if compiler && headers; then
    say "==> C compiler $(command -v gcc || command -v cc), Python.h for $("$PYTHON" -c 'import sys; print(sys.executable)')"
    exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "error: the accelerated build needs a C compiler and the Python headers."
    say "On Debian 12, as root:  apt-get update && apt-get install -y gcc python3-dev"
    exit 1
fi

say "==> installing gcc and python3-dev with apt-get (for the accelerated build)"
# Another apt-get (a broker's install, say) may hold a lock: apt-get.sh waits for it.
apt_get="$(dirname "$0")/apt-get.sh"
bash "$apt_get" update -qq
bash "$apt_get" install -y -qq --no-install-recommends gcc libc6-dev python3-dev >/dev/null
hash -r
if ! compiler; then
    say "error: gcc is installed but not on PATH."
    exit 1
fi
if ! headers; then
    say "error: $PYTHON has no Python.h (python3-dev serves Debian's python3 only)."
    exit 1
fi
say "==> $(gcc --version | head -1)"
