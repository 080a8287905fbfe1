"""The set-up scripts wait for the package manager instead of failing.

On a fresh machine another apt-get (unattended upgrades, a cloud-init step) often
holds the dpkg frontend lock for a minute or two.  Every apt-get the project's
scripts run therefore waits for that lock, for a bounded time, instead of failing
at once with "Could not get lock".
"""

from __future__ import annotations

import re

from packaging_checks import ROOT

LOCK_WAIT = "-o DPkg::Lock::Timeout=300"

# A line that runs apt-get (as opposed to a message that tells the user to run it):
# the command starts the line, possibly after "if" and "$SUDO".
APT_COMMAND = re.compile(r"^\s*(?:if\s+)?(?:\$SUDO\s+)?apt-get\s+(update|install)\b(.*)")


def apt_commands() -> list[tuple[str, str]]:
    found = []
    scripts = [*sorted((ROOT / "scripts").glob("*.sh"))]
    scripts += sorted((ROOT / "scripts" / "brokers").glob("*.sh"))
    for script in scripts:
        for number, line in enumerate(script.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            match = APT_COMMAND.search(code)
            if match:
                options = match.group(2)
                if "apt_opts" in options:
                    options = script.read_text()  # the options live in an array defined above
                found.append((f"{script.relative_to(ROOT)}:{number}", options))
    return found


def test_the_scripts_run_apt_get() -> None:
    # The check below would pass vacuously if the pattern stopped matching.
    where = [line for line, _ in apt_commands()]
    assert len(where) >= 12, where


def test_every_apt_get_waits_for_the_dpkg_lock() -> None:
    missing = [where for where, options in apt_commands() if LOCK_WAIT not in options]
    assert missing == [], f"apt-get without {LOCK_WAIT!r}: {missing}"
