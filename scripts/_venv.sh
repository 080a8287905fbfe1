# shellcheck shell=bash
# Shared virtual-environment bootstrap for scripts/test.sh and scripts/demo.sh.
#
# Source this file from the repository root, then call:
#
#     ensure_venv '.[dev]'     # or '.' for the package alone
#
# It picks Python 3.11+ (python3.11 first, then python3), creates ./.venv when
# it is missing, and installs the project in editable mode with the requested
# extras.  Afterwards VENV_BIN points at .venv/bin.  The install is skipped when
# an earlier run already installed the same requirement from the same
# pyproject.toml (a stamp file inside .venv records that).
#
# scripts/test.sh also uses find_python (a working CPython of a given minor
# version: on PATH, under pyenv, or in /usr/local/bin and /usr/bin) and
# ensure_wheel_venv (a venv that holds the package only as installed from a
# built wheel, never the checkout).

VENV_DIR=".venv"
VENV_BIN="$VENV_DIR/bin"

_venv_say() {
    printf '%s\n' "$*" >&2
}

_venv_pick_python() {
    local candidate
    for candidate in python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 && _venv_python_ok "$candidate"; then
            printf '%s\n' "$candidate"
            return 0
        fi
    done
    _venv_say "error: Python 3.11 or newer is required (tried python3.11 and python3)."
    _venv_say "On Debian 12: apt-get install -y python3 python3-venv"
    return 1
}

_venv_create() {
    local python="$1" dir="${2:-$VENV_DIR}"
    "$python" -m venv "$dir"
}

_venv_install_venv_support() {
    # python -m venv fails on Debian when ensurepip is not installed
    # (it ships in the separate python3-venv package).
    local python="$1" pyver
    pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        _venv_say "error: '$python -m venv' failed; ensurepip is probably missing."
        _venv_say "Fix it with (as root):  apt-get update && apt-get install -y python3-venv"
        _venv_say "(or python${pyver}-venv if python3 is not Python ${pyver}), then rerun this script."
        return 1
    fi
    _venv_say "==> '$python -m venv' failed; installing python3-venv with apt-get"
    # apt-get.sh waits for any other apt-get on the machine.
    local apt_get
    apt_get="$(dirname "${BASH_SOURCE[0]}")/apt-get.sh"
    bash "$apt_get" update
    bash "$apt_get" install -y python3-venv ||
        bash "$apt_get" install -y "python${pyver}-venv"
}

_venv_python_ok() {
    "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1
}

ensure_venv() {
    local requirement="$1" python stamp checksum wanted

    if ! { _venv_python_ok "$VENV_BIN/python" && "$VENV_BIN/python" -m pip --version >/dev/null 2>&1; }; then
        if [ -x "$VENV_BIN/python" ] && ! _venv_python_ok "$VENV_BIN/python"; then
            _venv_say "error: $VENV_DIR exists but does not use Python 3.11+; remove it and rerun."
            return 1
        fi
        python="$(_venv_pick_python)" || return 1
        # A half-made .venv (e.g. left behind when ensurepip was missing) is replaced.
        rm -rf "$VENV_DIR"
        _venv_say "==> creating $VENV_DIR with $python"
        if ! _venv_create "$python"; then
            rm -rf "$VENV_DIR"
            _venv_install_venv_support "$python" || return 1
            _venv_create "$python" || {
                _venv_say "error: '$python -m venv $VENV_DIR' still fails."
                return 1
            }
        fi
    fi

    stamp="$VENV_DIR/.stomp-proto-installed"
    checksum="$(cksum < pyproject.toml)"
    wanted="$requirement $checksum"
    if [ -f "$stamp" ]; then
        if grep -qxF -- "$wanted" "$stamp"; then
            return 0
        fi
        # Any earlier install of this pyproject.toml (with or without extras)
        # already covers the plain package.
        if [ "$requirement" = "." ] && grep -q -- " $checksum\$" "$stamp"; then
            return 0
        fi
    fi

    _venv_say "==> installing -e '$requirement' into $VENV_DIR"
    local -a pip_args=(install --quiet --editable "$requirement")
    # Reuse an already-installed build backend instead of fetching one into an
    # isolated build environment (saves a download; the first install on a
    # clean clone still goes through normal build isolation).  hatchling needs
    # the `editables` package for editable installs.
    if "$VENV_BIN/python" -c 'import hatchling, editables' >/dev/null 2>&1; then
        pip_args+=(--no-build-isolation)
    fi
    "$VENV_BIN/python" -m pip "${pip_args[@]}"
    printf '%s\n' "$wanted" >> "$stamp"
}

# find_python 3.12: prints the path of a working CPython 3.12, or fails.  A pyenv
# shim on PATH that is not selected fails to run, so every candidate is run once;
# pyenv's own versions are tried newest patch release first.
find_python() {
    local version="$1" candidate
    local -a candidates=("python$version")
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    if [ -d "$pyenv_root/versions" ]; then
        while IFS= read -r candidate; do
            candidates+=("$candidate")
        done < <(find "$pyenv_root/versions" -maxdepth 3 -path "*/versions/$version.*/bin/python$version" 2>/dev/null | sort -rV)
    fi
    candidates+=("/usr/local/bin/python$version" "/usr/bin/python$version")
    for candidate in "${candidates[@]}"; do
        if "$candidate" -c "
import platform, sys
sys.exit('%d.%d' % sys.version_info[:2] != '$version' or platform.python_implementation() != 'CPython')
" >/dev/null 2>&1; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

# clone_venv SOURCE DIR: DIR becomes a venv of SOURCE's Python holding what SOURCE
# holds, less SOURCE's editable install of the checkout.  The files are hard links
# (copies across file systems): seconds, where pip takes a minute or more on a busy
# machine, most of it unpacking pyspark again.  The scripts in SOURCE/bin are
# copied with their first line pointed at DIR's Python.
clone_venv() {
    local source="$1" dir="$2" from to script
    rm -rf "$dir"
    "$source/bin/python" -m venv --without-pip "$dir" || return 1
    from=$("$source/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    to=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    cp -al "$from/." "$to/" 2>/dev/null || cp -a "$from/." "$to/" || return 1
    "$dir/bin/python" -m pip uninstall --quiet --yes stomp_proto || return 1
    # pip wrote SOURCE's interpreter into its scripts' first line, by the path it was
    # run with: the logical one, or the physical one when SOURCE is a link.
    local logical physical target
    logical="$(cd "$source" && pwd)/bin/python"
    physical="$(cd "$source" && pwd -P)/bin/python"
    target="$(cd "$dir" && pwd)/bin/python"
    for script in "$source"/bin/*; do
        case "${script##*/}" in
            python* | activate* | Activate.ps1) continue ;;
        esac
        [ -f "$script" ] || continue
        if [ "$(head -c 2 "$script")" = "#!" ]; then
            sed -e "1s|^#!$logical[0-9.]*$|#!$target|" -e "1s|^#!$physical[0-9.]*$|#!$target|" \
                "$script" > "$dir/bin/${script##*/}"
            chmod --reference="$script" "$dir/bin/${script##*/}"
        else
            cp -a "$script" "$dir/bin/"  # a binary (ruff)
        fi
    done
}

# ensure_wheel_venv DIR PYTHON WHEEL EXTRAS [SOURCE]: DIR becomes a venv of PYTHON
# (created when missing) holding WHEEL's dependencies with EXTRAS, installed when
# pyproject.toml changed since the last run, and the package itself reinstalled from
# WHEEL on every call, so a file missing from the wheel is missing there too.  SOURCE:
# a venv of the same Python with the checkout installed editable with those extras
# (ensure_venv's); its dependencies are cloned rather than installed again, when its
# stamp says it holds those of this pyproject.toml.
ensure_wheel_venv() {
    local dir="$1" python="$2" wheel="$3" extras="$4" source="${5:-}" stamp wanted
    stamp="$dir/.stomp-proto-installed"
    wanted="$extras $(cksum < pyproject.toml)"
    if [ -n "$source" ] && ! grep -qxF -- "$wanted" "$stamp" 2>/dev/null \
        && grep -qxF -- ".[$extras] $(cksum < pyproject.toml)" "$source/.stomp-proto-installed" 2>/dev/null; then
        _venv_say "==> $dir: a clone of $source, less its editable install"
        if clone_venv "$source" "$dir"; then
            printf '%s\n' "$wanted" > "$stamp"
        else
            _venv_say "cloning $source failed: $dir is made with pip instead"
            rm -rf "$dir"
        fi
    fi
    if ! "$dir/bin/python" -m pip --version >/dev/null 2>&1; then
        rm -rf "$dir"
        _venv_say "==> creating $dir with $python"
        if ! _venv_create "$python" "$dir"; then
            rm -rf "$dir"
            _venv_install_venv_support "$python" || return 1
            _venv_create "$python" "$dir" || return 1
        fi
    fi
    if ! grep -qxF -- "$wanted" "$stamp" 2>/dev/null; then
        _venv_say "==> installing the dependencies of ${wheel##*/}[$extras] into $dir"
        # --no-compile: byte-compiling every module of every dependency (pyspark has
        # thousands) costs more than compiling on import the few the tests load.
        "$dir/bin/python" -m pip install --quiet --no-compile "$wheel[$extras]"
        printf '%s\n' "$wanted" > "$stamp"
    fi
    "$dir/bin/python" -m pip install --quiet --no-compile --force-reinstall --no-deps "$wheel"
}
