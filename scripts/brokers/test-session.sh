# shellcheck shell=bash
# Real brokers for one run of scripts/test.sh.  Sourced, not executed:
#
#   source scripts/brokers/test-session.sh
#   brokers_begin      # start them in the background (installs first when root on Debian)
#   ...                # lint, type check, docs: the brokers boot meanwhile
#   brokers_ready      # wait for them; export their coordinates for pytest
#
# brokers_begin installs an EXIT trap that stops exactly the brokers this run
# booted (a broker already running before is left alone), also when the run
# fails or is interrupted.  STOMP_BROKERS=none skips all of it.

_BROKERS_PID=""
_BROKERS_TMP=""

brokers_begin() {
    _BROKERS_TMP="$(mktemp -d)"
    : > "$_BROKERS_TMP/claims"
    STOMP_BROKERS_CLAIM_FILE="$_BROKERS_TMP/claims" \
        bash scripts/start-brokers.sh > "$_BROKERS_TMP/env" 2> "$_BROKERS_TMP/err" &
    _BROKERS_PID=$!
    trap brokers_end EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

brokers_ready() {
    local status=0
    if [ -n "$_BROKERS_PID" ]; then
        wait "$_BROKERS_PID" || status=$?
        _BROKERS_PID=""
    fi
    cat "$_BROKERS_TMP/err" >&2
    if [ "$status" -ne 0 ]; then
        echo "brokers: not all of them came up; their tests will skip (fail under CI=true)" >&2
    fi
    set -a
    # shellcheck disable=SC1091
    . "$_BROKERS_TMP/env"
    set +a
}

brokers_end() {
    local rc=$?
    if [ -n "$_BROKERS_TMP" ]; then
        if [ -n "$_BROKERS_PID" ]; then
            wait "$_BROKERS_PID" 2>/dev/null || true
            _BROKERS_PID=""
        fi
        bash scripts/stop-brokers.sh --claims "$_BROKERS_TMP/claims" || true
        rm -rf "$_BROKERS_TMP"
        _BROKERS_TMP=""
    fi
    return "$rc"
}
