#!/usr/bin/env bash
# Run the whole stomp-proto check suite: lint, type check, docs, doctests, the
# built distributions, the tests on every CPython 3.11+ found, fuzzing.
#
#     bash scripts/test.sh [extra pytest arguments...]
#
# Creates ./.venv (Python 3.11, the package installed editable with its dev extras)
# for ruff, mypy, Sphinx, the build and fuzzing.  The tests run against the built
# wheel, never the checkout: the whole suite in .venv-wheel (Python 3.11, dev
# extras), and the core, client and broker tests in .venv-3.12, .venv-3.13 ...
# (test extras), one venv per CPython found; the same tests, and the Spark read and
# write tests, run in .venv-accelerated (Python 3.11, test and spark extras) against
# the accelerated wheel that
# scripts/build_accelerated.py makes of the pure one (the native fast path, Cython; a
# failed build fails the run under CI=true, and is skipped with a note elsewhere;
# scripts/ensure-toolchain.sh installs gcc and python3-dev first when missing and run
# as root).  Extra arguments go to every pytest
# run (-k heartbeat, tests/test_cli.py ...).  STOMP_PYTHONS="3.12" (say) narrows
# the other Pythons; "none" skips them.  See docs/development.rst.
# Stops at the first failing step with a non-zero exit status.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# shellcheck source=scripts/_venv.sh
source scripts/_venv.sh
ensure_venv '.[dev]'

# Real brokers (RabbitMQ, ActiveMQ) for tests/test_interop_brokers.py: installed when
# run as root on Debian, booting in the background while the checks below run, and
# stopped on exit - only those this run started.  STOMP_BROKERS=none skips them.
# shellcheck source=scripts/brokers/test-session.sh
source scripts/brokers/test-session.sh
brokers_begin

# The Spark tests need Java 17+ (installed from Debian when missing and root).
# Without it they skip, or fail under CI=true: let them say so.
bash scripts/ensure-java.sh || true

# The stompjs interop tests need Node.js and npm (installed from Debian when missing
# and root); they run `npm ci` in tests/js themselves.  Same rule: skip, or fail under CI.
bash scripts/ensure-node.sh || true

# The docs screenshot check needs Chromium (installed from Debian when missing and root).
chromium_ready=true
bash scripts/ensure-chromium.sh || chromium_ready=false

# Each heading shows the seconds since the start, so the log tells what each step cost.
section() {
    printf '\n==> %s  [%ss]\n' "$*" "$SECONDS"
}

section "ruff check"
"$VENV_BIN/ruff" check stomp_proto tests benchmarks examples

section "mypy --strict"
"$VENV_BIN/mypy" --strict stomp_proto

# -E: a fresh environment every time.  An earlier build's pickled one kept objects that
# pages no longer define, and warned about duplicates that a clean clone never sees.
section "sphinx html"
"$VENV_BIN/sphinx-build" -E -W --keep-going -b html docs docs/_build/html -q

# The built site in headless Chromium at 1280 and 390 px: no page may scroll sideways,
# no chart may be unreadable without a link to its full size; screenshots of the
# index, a guide, the reference and the benchmarks page go to docs/_build/screenshots.
section "docs in Chromium"
if [ "$chromium_ready" = true ]; then
    "$VENV_BIN/python" scripts/docs_screens.py --html docs/_build/html --out docs/_build/screenshots
elif [ "${CI:-}" = true ]; then
    echo "error: CI=true and no chromium for the docs screenshot check" >&2
    exit 1
else
    echo "chromium missing: docs screenshot check skipped (bash scripts/ensure-chromium.sh)"
fi

section "sphinx doctest"
"$VENV_BIN/sphinx-build" -E -W -b doctest docs docs/_build/doctest -q

# The sdist and the wheel, built as a release would be (the wheel from the sdist, each
# in an isolated build environment) and checked as PyPI would check them.
section "build: sdist and wheel"
rm -rf dist
build_log=$(mktemp)
"$VENV_BIN/python" -m build --outdir dist . > "$build_log" 2>&1 || { cat "$build_log" >&2; exit 1; }
rm -f "$build_log"
ls -l dist
SDIST=$(echo dist/stomp_proto-*.tar.gz)
WHEEL=$(echo dist/stomp_proto-*-py3-none-any.whl)
"$VENV_BIN/twine" check --strict "$SDIST" "$WHEEL"

# The accelerated wheel for this interpreter: the pure wheel plus the native fast path
# (scripts/build_accelerated.py --wheel: Cython and gcc, about 10 s on two cores).  In
# CI it is part of the release, so a failed build fails the run; elsewhere (no C
# compiler, say) the accelerated run is skipped with a note.
section "build: accelerated wheel (native fast path)"
ACCELERATED_WHEEL=
if bash scripts/ensure-toolchain.sh "$VENV_BIN/python" \
    && "$VENV_BIN/python" scripts/build_accelerated.py --wheel "$WHEEL"; then
    ACCELERATED_WHEEL=$(echo dist/stomp_proto-*-cp*.whl)
    "$VENV_BIN/twine" check --strict "$ACCELERATED_WHEEL"
elif [ "${CI:-}" = true ]; then
    echo "error: CI=true and the accelerated wheel failed to build" >&2
    exit 1
else
    echo "the accelerated wheel failed to build: its tests are skipped"
fi

# Every CPython 3.11+ on the machine, each in a venv of its own holding the wheel.
# 3.11 runs the whole suite; the others the core, client and broker tests (everything
# but the layers below, which need peers, brokers, Spark, atheris or a long run; the
# 3.11 run covers them).  Under CI=true a missing 3.12 or 3.13 fails the run.
OTHER_PYTHONS=(${STOMP_PYTHONS:-3.12 3.13 3.14})
[ "${OTHER_PYTHONS[*]}" = none ] && OTHER_PYTHONS=()
REQUIRED_IN_CI=(3.12 3.13)
NOT_EVERY_PYTHON=(
    # interop with real brokers and third-party clients (stomp.py, stompman, stompjs ...)
    tests/test_chaos_rabbitmq.py
    tests/test_interop_brokers.py
    tests/test_interop_websocket.py
    tests/test_stompjs_interop.py
    tests/test_stomppy_interop.py
    tests/test_stompman_interop.py
    tests/test_client_matrix.py
    tests/test_client_mistakes.py
    # the conformance checker: hundreds of connections per run, real brokers among them
    tests/test_checker.py
    # the PySpark data source
    tests/test_spark_integration.py
    tests/test_spark_kafka_parity.py
    tests/test_spark_logic.py
    tests/test_spark_streams_discovery.py
    tests/test_spark_streams_exactly_once.py
    tests/test_spark_streams_broker_restart.py
    tests/test_spark_docs_examples.py
    tests/test_spark_streams_logic.py
    tests/test_spark_streams_rabbitmq.py
    tests/test_spark_streams_rows.py
    tests/test_spark_streams_sink_exactly_once.py
    # fuzzing, benchmarks, the accelerated build and the docs
    tests/test_decoder_fuzz.py
    tests/test_fuzz_properties.py
    tests/fuzzing
    tests/test_benchmarks_smoke.py
    tests/test_accelerated_build.py
    tests/test_api_documented.py
    tests/test_docs_pages.py
    tests/test_docs_inventory.py
)
for path in "${NOT_EVERY_PYTHON[@]}"; do
    # A renamed or moved file would silently join the other Pythons' runs.
    [ -e "$path" ] || { echo "error: scripts/test.sh names $path, which is gone" >&2; exit 1; }
done

section "venvs: the wheel on every Python"
declare -A PYTHON_OF=() MATRIX_ROW=()
missing=()
for version in "${OTHER_PYTHONS[@]}"; do
    if python=$(find_python "$version"); then
        PYTHON_OF[$version]=$python
    elif [ "${CI:-}" = true ] && [[ " ${REQUIRED_IN_CI[*]} " == *" $version "* ]]; then
        missing+=("$version")
    else
        echo "Python $version: not on this machine, skipped"
        MATRIX_ROW[$version]="$version     not on this machine: skipped"
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "error: CI=true and no CPython ${missing[*]} on this machine (tried python${missing[0]} on PATH, pyenv, /usr/local/bin, /usr/bin)" >&2
    exit 1
fi
# The venvs are made side by side (pip waits on the network and the disk more than on
# the CPU), each with its own log, shown when it is done.
venv_logs=$(mktemp -d)
declare -A VENV_JOB=()
ensure_wheel_venv .venv-wheel "$VENV_BIN/python" "$WHEEL" dev > "$venv_logs/wheel" 2>&1 &
VENV_JOB[wheel]=$!
if [ -n "$ACCELERATED_WHEEL" ]; then
    ensure_wheel_venv .venv-accelerated "$VENV_BIN/python" "$ACCELERATED_WHEEL" test,spark \
        > "$venv_logs/accelerated" 2>&1 &
    VENV_JOB[accelerated]=$!
fi
for version in "${!PYTHON_OF[@]}"; do
    ensure_wheel_venv ".venv-$version" "${PYTHON_OF[$version]}" "$WHEEL" test \
        > "$venv_logs/$version" 2>&1 &
    VENV_JOB[$version]=$!
done
for name in "${!VENV_JOB[@]}"; do
    status=0
    wait "${VENV_JOB[$name]}" || status=$?
    cat "$venv_logs/$name"
    if [ "$status" -ne 0 ]; then
        echo "error: making the venv for $name failed (exit $status)" >&2
        exit "$status"
    fi
done
rm -rf "$venv_logs"
MATRIX=("$(.venv-wheel/bin/python -c 'import platform; print(platform.python_version())')  whole suite (.venv-wheel)")

# run_tests VENV LOG [pytest arguments...]: pytest in VENV against its installed wheel.
# It runs from tests/, so neither pytest nor a subprocess the tests start (python -m
# stomp_proto ...) finds the checkout's stomp_proto on sys.path; conftest.py stops the
# run if stomp_proto is imported from outside the venv all the same, or if its core is
# not the build the venv holds (stomp_proto.BUILD: "accelerated" in .venv-accelerated,
# so a silent fallback to the Python sources fails the run; "pure" everywhere else).
run_tests() {
    local venv="$1" log="$2" status=0 build=pure
    shift 2
    [ "$venv" = .venv-accelerated ] && build=accelerated
    (cd tests && STOMP_PROTO_TEST_INSTALLED=1 STOMP_PROTO_EXPECT_BUILD=$build \
        STOMP_PROTO_SDIST="$ROOT/$SDIST" STOMP_PROTO_WHEEL="$ROOT/$WHEEL" \
        "$ROOT/$venv/bin/python" -m pytest "$@") 2>&1 | tee "$log" || status=$?
    if [ "$status" -eq 5 ]; then
        echo "error: pytest collected no tests" >&2
    fi
    return "$status"
}

# summary LOG: pytest's closing counts ("2024 passed, 3 skipped in 61.2s").
summary() {
    tail -n 1 "$1" | sed -E 's/^=+ //; s/ =+$//; s/ in [0-9.]+s.*$//'
}

# The user's pytest arguments name paths from the repository root; pytest runs from tests/.
pytest_args=()
for arg in "$@"; do
    if [[ "$arg" != -* ]] && [ -e "${arg%%::*}" ]; then
        arg="$ROOT/$arg"
    fi
    pytest_args+=("$arg")
done

section "brokers"
brokers_ready

logs=$(mktemp -d)
section "pytest: Python $(.venv-wheel/bin/python -c 'import platform; print(platform.python_version())'), whole suite, installed wheel"
run_tests .venv-wheel "$logs/3.11" "${pytest_args[@]}" || exit $?
MATRIX[0]="${MATRIX[0]}: $(summary "$logs/3.11")"

# The benchmark suite's smoke run (scripts/bench.sh --quick under pytest): left
# out of a plain pytest run by its "benchmark" marker, run here as its own step
# (unless pytest arguments chose the tests).
if [ ${#pytest_args[@]} -eq 0 ]; then
    section "pytest: benchmark smoke run, installed wheel"
    run_tests .venv-wheel "$logs/bench" -q -p no:cacheprovider -m benchmark || exit $?
fi

ignores=()
for path in "${NOT_EVERY_PYTHON[@]}"; do
    ignores+=("--ignore=$ROOT/$path")
done
for version in "${OTHER_PYTHONS[@]}"; do
    [ -n "${PYTHON_OF[$version]:-}" ] || continue
    full=$(".venv-$version/bin/python" -c 'import platform; print(platform.python_version())')
    section "pytest: Python $full, core, client and broker tests, installed wheel"
    # One worker per core: the heart-beat tests count in 100 ms steps, and more
    # workers than cores made one of them miss its deadline under load.
    run_tests ".venv-$version" "$logs/$version" -q -p no:cacheprovider -n 2 "${ignores[@]}" \
        "${pytest_args[@]}" || exit $?
    MATRIX_ROW[$version]="$full  core, client and broker (.venv-$version): $(summary "$logs/$version")"
done
for version in "${OTHER_PYTHONS[@]}"; do
    MATRIX+=("${MATRIX_ROW[$version]}")
done

# The same tests on the accelerated wheel (the native fast path, on this Python).
full=$(.venv-wheel/bin/python -c 'import platform; print(platform.python_version())')
if [ -n "$ACCELERATED_WHEEL" ]; then
    section "pytest: Python $full, core, client and broker tests, accelerated wheel"
    run_tests .venv-accelerated "$logs/accelerated" -q -p no:cacheprovider -n 2 "${ignores[@]}" \
        "${pytest_args[@]}" || exit $?
    MATRIX+=("$full  accelerated, core, client and broker (.venv-accelerated): $(summary "$logs/accelerated")")
    # The Spark read path on it too: the read task's rows against the event path, the
    # options and plans, and real stream reads and writes on RabbitMQ (the slowest
    # Spark files, the driver kills and task retries, stay in the 3.11 run above).
    if [ ${#pytest_args[@]} -eq 0 ]; then
        section "pytest: Python $full, Spark read and write tests, accelerated wheel"
        run_tests .venv-accelerated "$logs/accelerated-spark" -q -p no:cacheprovider \
            "$ROOT/tests/test_spark_streams_rows.py" "$ROOT/tests/test_spark_logic.py" \
            "$ROOT/tests/test_spark_streams_logic.py" \
            "$ROOT/tests/test_spark_streams_rabbitmq.py" || exit $?
        MATRIX+=("$full  accelerated, Spark read and write (.venv-accelerated): $(summary "$logs/accelerated-spark")")
    fi
else
    MATRIX+=("$full  accelerated: the accelerated wheel did not build, skipped")
fi
rm -rf "$logs"


# Fuzzing: each atheris harness for a bounded time (hypothesis when atheris is
# missing); a crash fails the run.  See scripts/fuzz.sh.
section "fuzz"
PYTHON="$VENV_BIN/python" bash scripts/fuzz.sh --ci

section "Python matrix"
printf '  %s\n' "${MATRIX[@]}"

section "all checks passed"
