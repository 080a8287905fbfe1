#!/usr/bin/env bash
# Make sure a Java 17+ runtime is there for the Spark tests (pyspark 4 needs one).
#
#     bash scripts/ensure-java.sh
#
# Prints the Java in use and exits 0 when `java -version` (or $JAVA_HOME/bin/java)
# reports 17 or later.  Otherwise, when running as root on a system with apt-get
# (Debian 12), installs openjdk-17-jre-headless; elsewhere it says what to
# install and exits 1.  The Spark tests themselves skip without Java - except
# under CI=true, where they fail - so this script is what makes CI able to run
# them on a fresh machine.
set -euo pipefail

say() {
    printf '%s\n' "$*" >&2
}

java_bin() {
    if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
        printf '%s\n' "$JAVA_HOME/bin/java"
    elif command -v java >/dev/null 2>&1; then
        command -v java
    else
        return 1
    fi
}

# The major version `java -version` reports ("17.0.15" -> 17, "1.8.0_392" -> 8).
java_major() {
    local bin version
    bin="$(java_bin)" || return 1
    version="$("$bin" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)"
    [ -n "$version" ] || return 1
    case "$version" in
        1.*) version="${version#1.}" ;;
    esac
    printf '%s\n' "${version%%[.+-]*}"
}

java_ok() {
    local major
    major="$(java_major)" || return 1
    [ "$major" -ge 17 ] 2>/dev/null
}

if java_ok; then
    say "==> java $(java_major) at $(java_bin): fine for Spark"
    exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "error: Spark needs Java 17 or later, and none was found."
    say "On Debian 12, as root:  apt-get update && apt-get install -y openjdk-17-jre-headless"
    say "(or point JAVA_HOME at a Java 17+ installation)."
    exit 1
fi

say "==> installing openjdk-17-jre-headless with apt-get (Spark needs Java 17+)"
apt_get="$(dirname "$0")/apt-get.sh"  # waits for any other apt-get
bash "$apt_get" update -qq
# The JRE's post-install script needs the man page folder, which slim images lack.
mkdir -p /usr/share/man/man1
bash "$apt_get" install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null
hash -r
if ! java_ok; then
    say "error: openjdk-17-jre-headless is installed but \`java -version\` still is not 17+."
    say "Set JAVA_HOME (e.g. /usr/lib/jvm/java-17-openjdk-amd64) or fix the alternatives."
    exit 1
fi
say "==> java $(java_major) at $(java_bin)"
