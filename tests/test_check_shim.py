"""The conformance checker left the package for the stomp-check distribution: what stays.

``python -m stomp_proto check`` and ``check-client`` hand their arguments to
stomp-check when it is installed, and say how to install it (exit 2) when it is
not; ``stomp_proto.check`` warns and re-exports, or names the install line.
Without stomp-check (the other Pythons' venvs hold the core's wheel alone) the
tests of the delegation skip; "not installed" is made here by blocking the import.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from timeouts import scaled

from stomp_proto._cli import CHECKER_COMMANDS, build_parser, main

INSTALL_LINE = "pip install ./stomp-check"


def _without_stomp_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import stomp_check`` raises ImportError from now on (until the test ends)."""
    monkeypatch.setitem(sys.modules, "stomp_check", None)
    monkeypatch.delitem(sys.modules, "stomp_proto.check", raising=False)


@pytest.mark.parametrize("command", list(CHECKER_COMMANDS))
def test_a_check_command_without_stomp_check_says_how_to_install_it(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _without_stomp_check(monkeypatch)
    assert main([command, "127.0.0.1:61613"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"stomp-proto {command}: ") and INSTALL_LINE in err, err
    assert "Traceback" not in err


def test_the_commands_are_listed_with_what_they_need() -> None:
    text = build_parser().format_help()
    for command in CHECKER_COMMANDS:
        assert command in text
    assert "needs stomp-check" in text


@pytest.mark.parametrize("command", list(CHECKER_COMMANDS))
def test_a_check_command_runs_stomp_check(command: str) -> None:
    """In a process of its own, as a user runs it: the checker refuses the pattern before
    it connects, under the core's command name, with the checker's exit status."""
    pytest.importorskip("stomp_check")
    done = subprocess.run(
        [sys.executable, "-m", "stomp_proto", command, *(["127.0.0.1:9"] if command == "check"
         else []), "--cases", "no-such-case"],
        capture_output=True, text=True, timeout=scaled(60), check=False,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"stomp-proto {command}: --cases no-such-case matches no case")


def test_the_old_module_warns_and_gives_stomp_checks_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stomp_check = pytest.importorskip("stomp_check")
    monkeypatch.delitem(sys.modules, "stomp_proto.check", raising=False)
    with pytest.warns(DeprecationWarning, match="import stomp_check"):
        old = importlib.import_module("stomp_proto.check")
    assert set(old.__all__) <= set(stomp_check.__all__)
    for name in old.__all__:
        assert getattr(old, name) is getattr(stomp_check, name), name


def test_the_old_module_without_stomp_check_names_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_stomp_check(monkeypatch)
    with pytest.raises(ImportError, match=INSTALL_LINE.replace(".", r"\.")):
        importlib.import_module("stomp_proto.check")
