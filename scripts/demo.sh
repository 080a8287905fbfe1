#!/usr/bin/env bash
# Run the main job: the stomp-proto demo against the embedded broker, on the
# accelerated build.
#
#     bash scripts/demo.sh [--messages N] [--size BYTES]
#
# Installs the project into ./.venv-demo as a user would (pip install ., not editable),
# again whenever its sources changed: pip builds the wheel and, with it, the native
# fast path (hatch_build.py).  Before that install, scripts/ensure-toolchain.sh makes
# sure of a C compiler and the Python headers (as root on Debian it installs them);
# without them the demo runs the pure build, and its first line says why.
# STOMP_PROTO_NO_EXTENSIONS=1 installs and runs the pure build.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/_venv.sh
source scripts/_venv.sh

DEMO=.venv-demo

if ! "$DEMO/bin/python" -m pip --version >/dev/null 2>&1; then
    python=$(_venv_pick_python)
    rm -rf "$DEMO"
    _venv_say "==> creating $DEMO with $python"
    if ! _venv_create "$python" "$DEMO"; then
        rm -rf "$DEMO"
        _venv_install_venv_support "$python"
        _venv_create "$python" "$DEMO"
    fi
fi

# What the install is made of, and whether it may hold the native module.
sources() {
    printf '%s\n' "${STOMP_PROTO_NO_EXTENSIONS:-}"
    find pyproject.toml hatch_build.py scripts/build_accelerated.py stomp_proto -type f \
        \( -name '*.py' -o -name '*.pyx' -o -name '*.pxd' -o -name '*.toml' -o -name py.typed \) \
        -print0 | sort -z | xargs -0 cat
}
stamp="$DEMO/.stomp-proto-demo"
wanted=$(sources | cksum)
if ! grep -qxF -- "$wanted" "$stamp" 2>/dev/null; then
    if [ -z "${STOMP_PROTO_NO_EXTENSIONS:-}" ]; then
        bash scripts/ensure-toolchain.sh "$DEMO/bin/python" ||
            _venv_say "==> no C toolchain: the demo runs the pure build"
    fi
    _venv_say "==> installing stomp-proto (pip install .) into $DEMO"
    "$DEMO/bin/python" -m pip install --quiet --force-reinstall .
    printf '%s\n' "$wanted" > "$stamp"
fi

# The installed console script, never the checkout (python -m would find ./stomp_proto).
"$DEMO/bin/stomp-proto" demo "$@"
