"""A conformance checker for STOMP brokers and clients: ``stomp-check HOST:PORT``.

:func:`run_check` runs the catalogue's cases (:func:`catalogue`) against a
running broker and returns a :class:`Report` of :class:`Result` values, each
with a :class:`Verdict` in Autobahn's terms; :func:`write_json`,
:func:`write_junit` and :func:`write_html` write it out; :func:`main` is the
``stomp-check`` command.  See ``docs/checking.rst``.  It uses the public names
of ``stomp_proto`` only.
"""

from stomp_proto import Version

from ._case import CATALOGUE, Case, Outcome, Probe, Verdict, case
from ._case import GROUPS as _GROUPS
from ._command import check_command, client_command, main
from ._html import write_html
from ._report import write_json, write_junit
from ._runner import Report, Result, run, select
from ._wire import RawFrame, Target, Unreachable, Wire

#: The groups of cases, in report order: the key used in case ids -> its title.
GROUPS: dict[str, str] = _GROUPS


def catalogue() -> list[Case]:
    """Every case, in the order of their ids."""
    return list(CATALOGUE)


def run_check(
    target: Target,
    versions: tuple[Version, ...] = ("1.0", "1.1", "1.2"),
    cases: tuple[str, ...] = (),
    exclude: tuple[str, ...] = (),
    *,
    workers: int = 12,
) -> Report:
    """Run the cases of ``versions`` matching ``cases`` (wildcards on ids, or group names)
    and not ``exclude`` against ``target``; raises :class:`Unreachable` when it cannot connect.
    """
    unknown = [v for v in versions if v not in ("1.0", "1.1", "1.2")]
    if unknown:
        raise ValueError(f"unknown STOMP versions {unknown}: use 1.0, 1.1 and 1.2")
    return run(target, select(versions, cases, exclude), workers=workers)


__all__ = [
    "GROUPS",
    "Case",
    "Outcome",
    "Probe",
    "RawFrame",
    "Report",
    "Result",
    "Target",
    "Unreachable",
    "Verdict",
    "Wire",
    "case",
    "catalogue",
    "check_command",
    "client_command",
    "main",
    "run_check",
    "write_html",
    "write_json",
    "write_junit",
]

__version__ = "0.1.0.dev0"

#: Each class renamed below, and the module that defines it (docs/conf.py puts these
#: back while the site is built, for autodoc's ``#:`` comments and viewcode).
DEFINED_IN: dict[type, str] = {}

# Tracebacks and reprs say stomp_check.Verdict, the name users import.
for _cls in (Probe, Unreachable, Verdict, Wire):
    DEFINED_IN[_cls] = _cls.__module__
    _cls.__module__ = __name__
