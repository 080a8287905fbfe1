#!/usr/bin/env bash
# Run the whole stomp-proto check suite: lint, type check, docs, doctests, tests.
#
#     bash scripts/test.sh [extra pytest arguments...]
#
# Creates ./.venv and installs the project with its dev extras when needed.
# Stops at the first failing step with a non-zero exit status.
set -euo pipefail
cd "$(dirname "$0")/.."

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

section() {
    printf '\n==> %s\n' "$*"
}

section "ruff check"
"$VENV_BIN/ruff" check stomp_proto tests benchmarks examples

section "mypy --strict"
"$VENV_BIN/mypy" --strict stomp_proto

section "sphinx html"
"$VENV_BIN/sphinx-build" -W --keep-going -b html docs docs/_build/html -q

section "sphinx doctest"
"$VENV_BIN/sphinx-build" -W -b doctest docs docs/_build/doctest -q

section "brokers"
brokers_ready

section "pytest"
status=0
"$VENV_BIN/python" -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "error: pytest collected no tests" >&2
fi
if [ "$status" -ne 0 ]; then
    exit "$status"
fi

# Fuzzing: each atheris harness for a bounded time (hypothesis when atheris is
# missing); a crash fails the run.  See scripts/fuzz.sh.
section "fuzz"
PYTHON="$VENV_BIN/python" bash scripts/fuzz.sh --ci

section "all checks passed"
