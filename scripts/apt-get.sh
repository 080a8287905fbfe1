#!/usr/bin/env bash
# apt-get, waiting for whoever else is using the package manager.  Every apt-get
# the project's scripts run goes through here:
#
#     bash scripts/apt-get.sh update -qq
#     bash scripts/apt-get.sh install -y -qq --no-install-recommends chromium
#
# On a fresh machine another apt-get (unattended upgrades, a cloud-init step, a
# second set-up script) often runs for a minute or two.  apt-get itself waits for
# the dpkg locks only when told to (DPkg::Lock::Timeout), and never for the lock of
# the package lists that `apt-get update` takes: it fails at once with "Could not
# get lock /var/lib/apt/lists/lock".  So this script waits until none of apt's lock
# files is held, saying which one and by whom, then runs apt-get with the rest of
# the wait as its dpkg lock time-out; when apt-get still fails for a lock (another
# one took it in between), it waits and tries again.  It gives up after
# APT_LOCK_WAIT seconds (default 300) with apt-get's own error and exit status.
#
# apt and dpkg lock these files with fcntl() record locks, which /proc/locks lists
# with the holder's process id and the file's inode; flock(1) takes another kind of
# lock, which apt neither sees nor takes.
set -euo pipefail

wait_limit=${APT_LOCK_WAIT:-300}
deadline=$((SECONDS + wait_limit))
APT_LOCKS=(
    /var/lib/dpkg/lock-frontend
    /var/lib/dpkg/lock
    /var/lib/apt/lists/lock
    /var/cache/apt/archives/lock
)

say() {
    printf 'apt-get.sh: %s\n' "$*" >&2
}

# lock_holder FILE: the id of the process holding an fcntl lock on FILE, if any.
lock_holder() {
    local inode
    inode=$(stat -c %i "$1" 2>/dev/null) || return 1
    # "1: POSIX  ADVISORY  WRITE 5517 fe:00:399286 0 EOF" (a blocked waiter's line
    # reads "1: -> POSIX ...": not a holder).
    awk -v inode="$inode" '$2 == "POSIX" {
        n = split($6, dev, ":"); if (dev[n] == inode) { print $5; exit } }' /proc/locks 2>/dev/null
}

# wait_for_locks: returns when no apt lock is held, or fails at the deadline.
wait_for_locks() {
    local lock pid busy said="" next_note=$((SECONDS + 30))
    while :; do
        busy=""
        for lock in "${APT_LOCKS[@]}"; do
            pid=$(lock_holder "$lock") || continue
            [ -n "$pid" ] || continue
            busy="$lock, held by process $pid ($(ps -o comm= -p "$pid" 2>/dev/null || echo gone))"
            break
        done
        [ -n "$busy" ] || return 0
        if [ "$busy" != "$said" ]; then
            say "waiting for $busy (up to $((deadline - SECONDS)) s more)"
            said=$busy
        elif [ "$SECONDS" -ge "$next_note" ]; then
            say "still waiting for $busy ($((deadline - SECONDS)) s left)"
            next_note=$((SECONDS + 30))
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "gave up after ${wait_limit} s waiting for $busy"
            return 1
        fi
        sleep 1
    done
}

export DEBIAN_FRONTEND=noninteractive
errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
while :; do
    # On timing out, apt-get below still runs once: its error says what is stuck.
    wait_for_locks || true
    remaining=$((deadline - SECONDS))
    [ "$remaining" -gt 0 ] || remaining=0
    status=0
    # stderr goes to the caller and to $errors, stdout to the caller alone.
    { apt-get -o "DPkg::Lock::Timeout=$remaining" "$@" 2>&1 1>&3 | tee "$errors" >&2; } 3>&1 \
        || status=$?
    [ "$status" -ne 0 ] || exit 0
    if [ "$SECONDS" -lt "$deadline" ] && grep -qE 'Could not get lock|Unable to (acquire|lock)' "$errors"; then
        say "apt-get lost a lock to another process: trying again"
        sleep 1
        continue
    fi
    exit "$status"
done
