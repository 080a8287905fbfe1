#!/usr/bin/env bash
# Run the whole stomp-proto check suite: lint, type check, docs, doctests, the
# built distributions, the tests on every CPython 3.11+ found and on both builds,
# fuzzing.
#
#     bash scripts/test.sh [extra pytest arguments...]
#
# Creates ./.venv (Python 3.11, the package installed editable with its dev extras)
# for ruff, mypy, Sphinx, the build and fuzzing.  The tests run against built wheels,
# never the checkout.  Each CPython found gets a venv - .venv-3.11 (dev extras),
# .venv-3.12, .venv-3.13 ... (test extras) - holding that Python's accelerated wheel:
# the pure wheel plus the native fast path, which scripts/build_accelerated.py builds
# with that Python (Cython and gcc; scripts/ensure-toolchain.sh installs gcc and
# python3-dev first when missing and run as root).  A failed build fails the run under
# CI=true; elsewhere the pure wheel is tested instead, with a note.
#
# 3.11 runs the whole suite on its accelerated wheel.  Every Python runs the core,
# client and broker tests on its accelerated wheel, and again with
# STOMP_PROTO_NO_EXTENSIONS=1 (the pure build; on 3.11 with the Spark read and write
# tests).  These runs, fuzzing, the benchmark smoke run and the docs checks go as
# jobs, STOMP_TEST_JOBS (3) at once, each run in two pytest-xdist workers; the tests
# marked serial (tests/conftest.py SERIAL says why) run in lanes: those that stop or
# freeze the shared brokers before the jobs that use them, the others beside the last
# jobs, and the short timers last, with nothing else beside them.  Extra
# arguments go to every pytest run (-k heartbeat, tests/test_cli.py ...).
# STOMP_PYTHONS="3.12" (say) narrows the other Pythons; "none" skips them.  See
# docs/development.rst.  A failing step stops the run with a non-zero exit status
# (a failing test run once the runs beside it have ended).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# shellcheck source=scripts/_venv.sh
source scripts/_venv.sh
ensure_venv '.[dev]'
# The satellite distributions of this repository (each in its folder, on the core's
# public names only) are linted, type-checked and documented from .venv too.
SATELLITES=(stomp-proto-kombu stomp-check stomp-proto-channels)
for satellite in "${SATELLITES[@]}"; do
    "$VENV_BIN/python" -m pip install --quiet --disable-pip-version-check -e "./$satellite[test]"
done

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

# The sdist and the pure wheel, built as a release would be (the wheel from the sdist,
# each in an isolated build environment) and checked as PyPI would check them.
# STOMP_PROTO_NO_EXTENSIONS=1: the pure wheel, which the accelerated ones below start
# from, whatever the build backend would otherwise compile.
section "build: sdist and pure wheel"
rm -rf dist
build_log=$(mktemp)
STOMP_PROTO_NO_EXTENSIONS=1 "$VENV_BIN/python" -m build --outdir dist . > "$build_log" 2>&1 \
    || { cat "$build_log" >&2; exit 1; }
rm -f "$build_log"
ls -l dist
SDIST=$(echo dist/stomp_proto-*.tar.gz)
WHEEL=$(echo dist/stomp_proto-*-py3-none-any.whl)
"$VENV_BIN/twine" check --strict "$SDIST" "$WHEEL"

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
    tests/test_browser_stompjs.py
    tests/test_browser_asgi.py
    tests/test_asgi_relay.py
    tests/test_asgi_workers.py
    tests/test_client_matrix.py
    tests/test_client_mistakes.py
    # brokers killed, frozen and hung under each client, timed: about 40 s, run alone
    tests/test_chaos_processes.py
    # the PySpark data source
    tests/test_spark_docs_examples.py
    tests/test_spark_integration.py
    tests/test_spark_kafka_parity.py
    tests/test_spark_logic.py
    tests/test_spark_streams_discovery.py
    tests/test_spark_streams_broker_restart.py
    tests/test_spark_streams_exactly_once.py
    tests/test_spark_streams_logic.py
    tests/test_spark_streams_rabbitmq.py
    tests/test_spark_streams_rows.py
    tests/test_spark_streams_sink_exactly_once.py
    tests/test_spark_queue_broker_restart.py
    # fuzzing, benchmarks, the accelerated build, the docs and the set-up scripts
    tests/test_decoder_fuzz.py
    tests/test_fuzz_properties.py
    tests/fuzzing
    tests/test_benchmarks_smoke.py
    tests/test_accelerated_build.py
    tests/test_build_hook.py
    tests/test_api_documented.py
    tests/test_docs_pages.py
    tests/test_docs_inventory.py
    tests/test_scripts.py
)
# The Spark read and write tests that the pure run of 3.11 adds: the read task's rows
# against the event path, the options and plans, real stream reads and writes.
PURE_SPARK=(
    tests/test_spark_streams_rows.py
    tests/test_spark_logic.py
    tests/test_spark_streams_logic.py
    tests/test_spark_streams_rabbitmq.py
)
for path in "${NOT_EVERY_PYTHON[@]}" "${PURE_SPARK[@]}"; do
    # A renamed or moved file would silently join the other Pythons' runs.
    [ -e "$path" ] || { echo "error: scripts/test.sh names $path, which is gone" >&2; exit 1; }
done

declare -A PYTHON_OF=([3.11]="$VENV_BIN/python") MATRIX_ROW=()
VERSIONS=(3.11)
missing=()
for version in "${OTHER_PYTHONS[@]}"; do
    if python=$(find_python "$version"); then
        PYTHON_OF[$version]=$python
        VERSIONS+=("$version")
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

# prepare_python VERSION: its venv with the pure wheel's dependencies, then its
# accelerated wheel built and installed there (the pure wheel when the build fails,
# outside CI).  Writes the build it installed to .venv-VERSION/.stomp-proto-build.
prepare_python() {
    local version="$1" dir=".venv-$1" extras=test accelerated source=
    # 3.11's venv holds what .venv holds (the dev extras, on the same Python): a clone.
    [ "$version" = 3.11 ] && extras=dev source=$VENV_DIR
    ensure_wheel_venv "$dir" "${PYTHON_OF[$version]}" "$WHEEL" "$extras" ${source:+"$source"}
    echo pure > "$dir/.stomp-proto-build"
    if bash scripts/ensure-toolchain.sh "$dir/bin/python" \
        && "$dir/bin/python" scripts/build_accelerated.py --wheel "$WHEEL"; then
        accelerated=$(echo dist/stomp_proto-*-cp"${version/./}"-*.whl)
        "$VENV_BIN/twine" check --strict "$accelerated"
        "$dir/bin/python" -m pip install --quiet --no-compile --force-reinstall --no-deps "$accelerated"
        echo accelerated > "$dir/.stomp-proto-build"
    elif [ "${CI:-}" = true ]; then
        echo "error: CI=true and the accelerated wheel for Python $version failed to build" >&2
        return 1
    else
        echo "the accelerated wheel for Python $version failed to build: its tests run on the pure wheel"
    fi
}

# The venvs and the accelerated wheels are made side by side, in the background
# while the checks below run (pip waits on the network and the disk, mypy and Sphinx
# keep one core busy); each has its own log, shown when it is done.
venv_logs=$(mktemp -d)
declare -A VENV_JOB=()
for version in "${VERSIONS[@]}"; do
    prepare_python "$version" > "$venv_logs/$version" 2>&1 &
    VENV_JOB[$version]=$!
done

# The jobs: every check below runs in the background, its output in $logs/NAME, shown
# whole when it ends.  Up to STOMP_TEST_JOBS of them (default 3) run at once, the
# longest first: many tests wait on sockets, timers and subprocesses, and the other
# jobs use that time on the two cores.
logs=$(mktemp -d)
JOBS=${STOMP_TEST_JOBS:-3}
declare -A JOB_OF_PID=() JOB_STARTED=() JOB_LABEL=()
FAILED_JOBS=()
# start_job NAME LABEL COMMAND...: COMMAND in the background, its output in $logs/NAME.
start_job() {
    local name="$1" label="$2"
    shift 2
    JOB_STARTED[$name]=$SECONDS
    JOB_LABEL[$name]=$label
    "$@" > "$logs/$name" 2>&1 &
    JOB_OF_PID[$!]=$name
}
# finish_job: wait for any job to end, then show its output.
finish_job() {
    local pid status=0 name
    wait -n -p pid "${!JOB_OF_PID[@]}" || status=$?
    name=${JOB_OF_PID[$pid]}
    unset "JOB_OF_PID[$pid]"
    printf '\n==> %s  [%ss, %ss]\n' "${JOB_LABEL[$name]}" "${JOB_STARTED[$name]}" \
        "$((SECONDS - JOB_STARTED[$name]))"
    cat "$logs/$name"
    if [ "$status" -ne 0 ]; then
        echo "error: ${JOB_LABEL[$name]} failed (exit $status)" >&2
        FAILED_JOBS+=("$name")
    fi
}

# Lint, types and the documentation: .venv is all they need, so they start now,
# beside the venvs and the accelerated wheels.
docs_checks() {
    section "ruff check"
    "$VENV_BIN/ruff" check stomp_proto tests benchmarks examples "${SATELLITES[@]}"

    section "mypy --strict"
    "$VENV_BIN/mypy" --strict stomp_proto
    local satellite
    for satellite in "${SATELLITES[@]}"; do
        # (each with its own settings, from its pyproject.toml)
        (cd "$satellite" && "$ROOT/$VENV_BIN/mypy" "${satellite//-/_}")
    done

    # -E: a fresh environment every time.  An earlier build's pickled one kept objects
    # that pages no longer define, and warned about duplicates that a clean clone never
    # sees.
    section "sphinx html"
    "$VENV_BIN/sphinx-build" -E -W --keep-going -b html docs docs/_build/html -q

    # What that build indexed, against the package's public names (the test would
    # otherwise build the site again; the whole-suite run leaves it out).
    section "the site's index: every public name"
    STOMP_PROTO_DOCS_HTML="$ROOT/docs/_build/html" "$VENV_BIN/python" -m pytest -q \
        -p no:cacheprovider tests/test_docs_inventory.py

    # The built site in headless Chromium at 1280 and 390 px: no page may scroll
    # sideways, no chart may be unreadable without a link to its full size;
    # screenshots of the index, a guide, the reference and the benchmarks page go to
    # docs/_build/screenshots.
    section "docs in Chromium"
    if [ "$chromium_ready" = true ]; then
        "$VENV_BIN/python" scripts/docs_screens.py --html docs/_build/html --out docs/_build/screenshots
    elif [ "${CI:-}" = true ]; then
        echo "error: CI=true and no chromium for the docs screenshot check" >&2
        return 1
    else
        echo "chromium missing: docs screenshot check skipped (bash scripts/ensure-chromium.sh)"
    fi

    section "sphinx doctest"
    "$VENV_BIN/sphinx-build" -E -W -b doctest docs docs/_build/doctest -q
}
section "lint, types and docs: in the background"
start_job docs "ruff, mypy --strict, Sphinx, the docs in Chromium, doctest" docs_checks

# wait_venv VERSION: until that Python's venv and accelerated wheel are ready.
wait_venv() {
    local status=0
    wait "${VENV_JOB[$1]}" || status=$?
    cat "$venv_logs/$1"
    if [ "$status" -ne 0 ]; then
        echo "error: preparing Python $1 failed (exit $status)" >&2
        exit "$status"
    fi
}
section "venvs and accelerated wheels: 3.11"
wait_venv 3.11

section "brokers"
brokers_ready

# The user's pytest arguments name paths from the repository root; pytest runs from tests/.
pytest_args=()
for arg in "$@"; do
    if [[ "$arg" != -* ]] && [ -e "${arg%%::*}" ]; then
        arg="$ROOT/$arg"
    fi
    pytest_args+=("$arg")
done

# run_tests NAME VERSION BUILD [pytest arguments...]: pytest in .venv-VERSION against
# its installed wheel, as BUILD (accelerated, or pure: STOMP_PROTO_NO_EXTENSIONS=1),
# its output in $logs/NAME.  It runs from tests/, so neither pytest nor a subprocess
# the tests start (python -m stomp_proto ...) finds the checkout's stomp_proto on
# sys.path; conftest.py stops the run if stomp_proto is imported from outside the venv
# all the same, or if its core is not BUILD (a silent fallback from the native fast
# path to the Python sources fails the run).  No test collected fails a run, but not
# its serial pass: a selection may leave that empty.
run_tests() {
    local name="$1" version="$2" build="$3" status=0
    shift 3
    local -a no_extensions=() spark_lock=()
    [ "$build" = pure ] && no_extensions=(STOMP_PROTO_NO_EXTENSIONS=1)
    # The serial lanes run side by side, one lane's Spark tests at a time (conftest.py).
    [[ "$name" == *-serial-* ]] && spark_lock=(STOMP_PROTO_SPARK_LOCK="$logs/spark.lock")
    # The Pythons after 3.11 check the same properties with fewer examples (the
    # "matrix" profile of tests/conftest.py: 50 where 3.11's runs take 200).
    local profile=${HYPOTHESIS_PROFILE:-ci}
    [ "$version" = 3.11 ] || profile=${HYPOTHESIS_PROFILE:-matrix}
    # This Python's accelerated wheel, when it was built: tests/test_accelerated_build.py
    # takes it instead of building its own.
    local -a accelerated_wheel=()
    local built
    for built in dist/stomp_proto-*-cp"${version/./}"-*.whl; do
        [ -f "$built" ] && accelerated_wheel=(STOMP_PROTO_ACCELERATED_WHEEL="$ROOT/$built")
    done
    (cd tests && env "${no_extensions[@]}" "${spark_lock[@]}" "${accelerated_wheel[@]}" HYPOTHESIS_PROFILE="$profile" \
        STOMP_PROTO_TEST_INSTALLED=1 STOMP_PROTO_EXPECT_BUILD="$build" STOMP_PROTO_SDIST="$ROOT/$SDIST" \
        STOMP_PROTO_WHEEL="$ROOT/$WHEEL" "$ROOT/.venv-$version/bin/python" -m pytest \
        -p no:cacheprovider "$@") > "$logs/$name" 2>&1 || status=$?
    if [ "$status" -eq 5 ]; then
        [[ "$name" == *-serial-*.pytest ]] && return 0
        echo "error: pytest collected no tests" >> "$logs/$name"
    fi
    return "$status"
}

# In the parallel phase each run has two xdist workers (the whole suite, the longest
# job, three) that take whole files (a module's fixtures - a Spark session, the
# brokers' queues, an accelerated build - are made once).  --durations: the log says
# where the time of each run goes.
PARALLEL=(--dist loadfile --durations=15)
installed_build() {
    cat ".venv-$1/.stomp-proto-build"
}
# The runs, their arguments in RUN_ARGS[NAME], their version and build in RUN_ON[NAME].
declare -A RUN_ARGS=() RUN_LABEL=() RUN_ON=()
# test_job NAME: that run (as a job's command).
test_job() {
    local name="$1" version build
    IFS='|' read -r version build <<< "${RUN_ON[$name]}"
    # shellcheck disable=SC2086
    eval "local -a args=(${RUN_ARGS[$name]})"
    run_tests "$name.pytest" "$version" "$build" "${args[@]}" || { cat "$logs/$name.pytest"; return 1; }
    cat "$logs/$name.pytest"
}

# describe VERSION BUILD: "3.12.1, accelerated wheel" and the like.
describe() {
    local full
    full=$(".venv-$1/bin/python" -c 'import platform; print(platform.python_version())')
    printf '%s, %s' "$full" "$2"
}

# The runs.  whole-3.11: the whole suite on the default build of 3.11; ccb-VERSION-BUILD:
# the core, client and broker tests (on 3.11 pure with the Spark read and write ones).
# Each has its serial passes, NAME-serial-LANE.  PARALLEL_RUNS is in the order they start:
# the longest first.
PARALLEL_RUNS=() SERIAL_RUNS_first=() SERIAL_RUNS_shared=() SERIAL_RUNS_own=() SERIAL_RUNS_alone=()
DEFAULT_BUILD=$(installed_build 3.11)
# The serial tests go in four lanes (tests/conftest.py SERIAL_LANE): "first" (tests
# that stop, freeze or flood the shared brokers) runs before the jobs that use them;
# "own" (brokers and processes of their own) and "shared" (the shared brokers, left
# as they were) run beside the last jobs; "alone" (timers of 500 ms or less) runs
# after every other test.  SERIAL_PATHS_<LANE>: the
# modules that hold a lane's tests, unless the pytest arguments name the tests
# (collecting the whole suite for each serial pass costs seconds every time).
LANES=(first shared own alone)
declare -A LANE_MARKS=(
    [first]="serial_first and not benchmark"
    [shared]="serial and not serial_first and not serial_own and not serial_alone and not benchmark"
    [own]="serial_own and not benchmark"
    [alone]="serial_alone and not benchmark"
)
SERIAL_PATHS_first=() SERIAL_PATHS_shared=() SERIAL_PATHS_own=() SERIAL_PATHS_alone=()
if [ ${#pytest_args[@]} -eq 0 ]; then
    serial_modules=$("$VENV_BIN/python" -c '
import sys
sys.path.insert(0, "tests")
from conftest import SERIAL, SERIAL_LANE
lanes = {(SERIAL_LANE.get(name, "shared"), name.split("::")[0]) for name in {*SERIAL, *SERIAL_LANE}}
# The Spark tests of each lane keep two cores busy (a JVM or two, the brokers), and
# only one lane runs them at a time: the own lane runs them first, the shared lane
# last, so that the other lane fills the wait with its other tests.
def order(item):
    lane, module = item
    spark = module.startswith("test_spark")
    return (lane, spark if lane == "shared" else not spark, module)
for lane, module in sorted(lanes, key=order):
    print(lane, f"{module}.py")')
    while read -r lane path; do
        [ -e "tests/$path" ] || { echo "error: tests/conftest.py SERIAL names $path, which is gone" >&2; exit 1; }
        eval "SERIAL_PATHS_$lane+=(\"\$path\")"
    done <<< "$serial_modules"
fi
quote() { printf '%q ' "$@"; }
# add_run NAME VERSION BUILD LABEL [pytest arguments...]
add_run() {
    local name="$1" version="$2" build="$3" label="$4"
    shift 4
    RUN_ON[$name]="$version|$build"
    RUN_LABEL[$name]="pytest: Python $(describe "$version" "$build"), $label"
    local workers=2
    [ "$name" = whole-3.11 ] && workers=3
    RUN_ARGS[$name]=$(quote -q -n "$workers" "${PARALLEL[@]}" -m "not serial and not benchmark" "$@" "${pytest_args[@]}")
    # -rA: the serial tests are few, and what they print (the browser tests' roundtrips
    # and refusals) belongs in the log.  Only their lane's modules are collected.
    # (pytest collects a module named on its command line even when --ignore names it.)
    local lane path lane_paths serial_paths
    for lane in "${LANES[@]}"; do
        eval "lane_paths=(\"\${SERIAL_PATHS_$lane[@]}\")"
        serial_paths=()
        for path in "${lane_paths[@]}"; do
            [[ " $* " == *" --ignore=$ROOT/tests/$path "* ]] || serial_paths+=("$path")
        done
        if [ ${#pytest_args[@]} -gt 0 ] || [ ${#serial_paths[@]} -gt 0 ]; then
            RUN_ON[$name-serial-$lane]="$version|$build"
            RUN_ARGS[$name-serial-$lane]=$(quote -q -rA --durations=15 -m "${LANE_MARKS[$lane]}" "$@" "${serial_paths[@]}" "${pytest_args[@]}")
            RUN_LABEL[$name-serial-$lane]="${RUN_LABEL[$name]}, serial tests ($lane)"
            eval "SERIAL_RUNS_$lane+=(\"\$name-serial-\$lane\")"
        fi
    done
    PARALLEL_RUNS+=("$name")
}
# (tests/test_docs_inventory.py reads the site the docs job built.)
add_run whole-3.11 3.11 "$DEFAULT_BUILD" "whole suite" --ignore="$ROOT/tests/test_docs_inventory.py"
# serial_lane NAME...: those serial passes one after the other, each shown when it ends;
# the first that fails ends the lane.
serial_lane() {
    local name started status
    for name in "$@"; do
        started=$SECONDS
        status=0
        test_job "$name" > "$logs/$name" 2>&1 || status=$?
        printf '\n==> %s  [%ss, %ss]\n' "${RUN_LABEL[$name]}" "$started" "$((SECONDS - started))"
        cat "$logs/$name"
        if [ "$status" -ne 0 ]; then
            echo "error: ${RUN_LABEL[$name]} failed (exit $status)" >&2
            return "$status"
        fi
    done
}
# parallel_jobs: how many jobs are running, the serial lane of brokers of their own aside.
parallel_jobs() {
    local count=0 pid
    for pid in "${!JOB_OF_PID[@]}"; do
        [ "${JOB_OF_PID[$pid]}" = serial-own ] || count=$((count + 1))
    done
    echo "$count"
}
# running NAME: whether job NAME is still running.
running() {
    local pid
    for pid in "${!JOB_OF_PID[@]}"; do
        [ "${JOB_OF_PID[$pid]}" = "$1" ] && return 0
    done
    return 1
}
first_lane_running() {
    running serial-first || running serial-first-more
}
stop_if_failed() {
    if [ "${#FAILED_JOBS[@]}" -gt 0 ]; then
        while [ "${#JOB_OF_PID[@]}" -gt 0 ]; do finish_job; done
        echo "error: failed: ${FAILED_JOBS[*]} (see above)" >&2
        exit 1
    fi
}

# The lane that stops, freezes and floods the shared brokers goes first, as soon as
# 3.11 and the brokers are ready: beside the other venvs, the docs and the fuzzing,
# which use no broker.  The runs, which use them, wait for it.
FIRST_STARTED=${#SERIAL_RUNS_first[@]}
if [ "$FIRST_STARTED" -gt 0 ]; then
    section "tests marked serial that stop or freeze the shared brokers: first"
    start_job serial-first "serial tests that stop or freeze the shared brokers" \
        serial_lane "${SERIAL_RUNS_first[@]}"
fi

section "venvs and accelerated wheels: every other Python"
for version in "${VERSIONS[@]:1}"; do
    wait_venv "$version"
done
rm -rf "$venv_logs"
ls -l dist

for version in "${VERSIONS[@]}"; do
    builds=(pure)
    [ "$(installed_build "$version")" = accelerated ] && builds=(accelerated pure)
    for build in "${builds[@]}"; do
        [ "$version" = 3.11 ] && [ "$build" = "$DEFAULT_BUILD" ] && continue
        with_spark=false what="core, client and broker"
        if [ "$version" = 3.11 ] && [ ${#pytest_args[@]} -eq 0 ]; then
            with_spark=true what="core, client, broker, Spark read and write"
        fi
        ignores=()
        for path in "${NOT_EVERY_PYTHON[@]}"; do
            if [ "$with_spark" = true ] && [[ " ${PURE_SPARK[*]} " == *" $path "* ]]; then
                continue
            fi
            ignores+=("--ignore=$ROOT/$path")
        done
        add_run "ccb-$version-$build" "$version" "$build" "$what" "${ignores[@]}"
    done
done
JOB_QUEUE=()
# The fuzzing (each atheris harness on both builds for a bounded time, hypothesis
# when atheris is missing; a crash fails the run; see scripts/fuzz.sh) and the
# benchmark smoke run (scripts/bench.sh --quick under pytest: left out of a plain
# pytest run by its "benchmark" marker) run unless pytest arguments chose the tests.
fuzz() {
    PYTHON="$VENV_BIN/python" bash scripts/fuzz.sh --ci
}
if [ ${#pytest_args[@]} -eq 0 ]; then
    RUN_ON[bench]="3.11|$DEFAULT_BUILD"
    RUN_ARGS[bench]=$(quote -q -m benchmark)
    RUN_LABEL[bench]="pytest: Python $(describe 3.11 "$DEFAULT_BUILD"), benchmark smoke run"
    # First: it uses no broker, and runs beside the lane that stops and freezes them.
    JOB_QUEUE+=(fuzz)
fi
JOB_QUEUE+=("${PARALLEL_RUNS[@]}")
# The serial lane of brokers and processes of their own starts once every run has
# started, without a slot (below); the benchmark smoke run, the shortest job, last.
[ ${#SERIAL_RUNS_own[@]} -gt 0 ] && JOB_QUEUE+=(serial-own)
[ -n "${RUN_ARGS[bench]:-}" ] && JOB_QUEUE+=(bench)

section "tests, $JOBS jobs at a time: ${#PARALLEL_RUNS[@]} runs${RUN_ARGS[bench]:+, fuzzing and the benchmark smoke run}"
# (The other Pythons' runs have passes of that lane only when pytest arguments chose
# the tests.)
if [ "${#SERIAL_RUNS_first[@]}" -gt "$FIRST_STARTED" ]; then
    start_job serial-first-more "serial tests that stop or freeze the shared brokers" \
        serial_lane "${SERIAL_RUNS_first[@]:FIRST_STARTED}"
fi
for name in "${JOB_QUEUE[@]}"; do
    [ "${#FAILED_JOBS[@]}" -eq 0 ] || break
    if [ "$name" != fuzz ]; then
        while [ "${#FAILED_JOBS[@]}" -eq 0 ] && first_lane_running; do finish_job; done
    fi
    if [ "$name" = serial-own ]; then
        section "tests marked serial, brokers of their own: beside the last jobs"
        start_job serial-own "serial tests, brokers of their own" serial_lane "${SERIAL_RUNS_own[@]}"
        continue
    fi
    while [ "$(parallel_jobs)" -ge "$JOBS" ]; do finish_job; done
    [ "${#FAILED_JOBS[@]}" -eq 0 ] || break
    if [ "$name" = fuzz ]; then
        start_job fuzz "fuzz" fuzz
    else
        start_job "$name" "${RUN_LABEL[$name]}" test_job "$name"
    fi
done
while [ "${#FAILED_JOBS[@]}" -eq 0 ] && first_lane_running; do finish_job; done
stop_if_failed
# The other serial lanes leave the shared brokers as they were, and their time-outs
# have seconds of margin.  Once every run has started, the lane of brokers of their
# own starts at once, beside them (its Spark tests, the first it runs, are minutes of
# JVMs that use the cores the jobs leave idle while they wait); the shared lane takes
# the first slot that frees once every job has started.  One lane's Spark tests run
# at a time (the lock in tests/conftest.py).
if [ ${#SERIAL_RUNS_shared[@]} -gt 0 ]; then
    while [ "${#FAILED_JOBS[@]}" -eq 0 ] && [ "$(parallel_jobs)" -ge "$JOBS" ]; do finish_job; done
    stop_if_failed
    section "tests marked serial, shared brokers: beside the last jobs"
    start_job serial-shared "serial tests, shared brokers" serial_lane "${SERIAL_RUNS_shared[@]}"
fi
while [ "${#FAILED_JOBS[@]}" -eq 0 ] && [ "${#JOB_OF_PID[@]}" -gt 0 ]; do finish_job; done
stop_if_failed
# The tests with short timers: each run's pass at once (a few seconds of CPU each,
# mostly waiting on their timers), with nothing else running.
section "tests marked serial: short timers, with nothing else running"
for name in "${SERIAL_RUNS_alone[@]}"; do
    start_job "$name" "${RUN_LABEL[$name]}" test_job "$name"
done
while [ "${#JOB_OF_PID[@]}" -gt 0 ]; do finish_job; done
stop_if_failed

# Each satellite distribution installed from its folder into 3.11's venv, beside the
# core's wheel, and its own tests run there, with nothing else running: Kombu's suite
# on the embedded broker, RabbitMQ and ActiveMQ; the checker's hundreds of connections
# to embedded brokers, proxies and clients of its own, and to the shared brokers.
for satellite in "${SATELLITES[@]}"; do
    section "$satellite: installed from its folder, its tests"
    ".venv-3.11/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-build-isolation "./$satellite[test]"
    (cd "$satellite/tests" && STOMP_PROTO_EXPECT_BUILD="$DEFAULT_BUILD" \
        "$ROOT/.venv-3.11/bin/python" -m pytest -p no:cacheprovider -q -rs .) \
        || { echo "error: the tests of $satellite failed" >&2; exit 1; }
done

# summary NAME: pytest's closing counts ("2024 passed, 3 skipped").
summary() {
    tail -n 1 "$logs/$1" | sed -E 's/^=+ //; s/ =+$//; s/ in [0-9.]+s.*$//'
}
section "Python matrix"
for name in "${PARALLEL_RUNS[@]}"; do
    line="${RUN_LABEL[$name]#pytest: }: $(summary "$name.pytest")"
    for lane in "${LANES[@]}"; do
        [ -f "$logs/$name-serial-$lane.pytest" ] && line="$line; serial ($lane): $(summary "$name-serial-$lane.pytest")"
    done
    printf '  %s\n' "$line"
done
for version in "${OTHER_PYTHONS[@]}"; do
    [ -n "${MATRIX_ROW[$version]:-}" ] && printf '  %s\n' "${MATRIX_ROW[$version]}"
done
rm -rf "$logs"

section "all checks passed"
