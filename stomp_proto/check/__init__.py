"""Deprecated: the conformance checker is the ``stomp-check`` distribution now.

``import stomp_proto.check`` warns (DeprecationWarning) and gives the names of
:mod:`stomp_check` when it is installed; it raises ImportError, saying how to install
it, when it is not.  This module goes in the next release: import ``stomp_check``.
"""

import warnings

#: How to install the checker, for the messages that need it.
INSTALL_HINT = (
    "the conformance checker is the stomp-check distribution: pip install stomp-check "
    "(from a checkout of stomp-proto: pip install ./stomp-check)"
)

try:
    import stomp_check as _stomp_check
except ImportError as exc:
    raise ImportError(f"stomp_proto.check is gone: {INSTALL_HINT}", name=__name__) from exc

warnings.warn(
    "stomp_proto.check is deprecated and goes in the next release: import stomp_check",
    DeprecationWarning,
    stacklevel=2,
)

GROUPS = _stomp_check.GROUPS
Case = _stomp_check.Case
Outcome = _stomp_check.Outcome
Probe = _stomp_check.Probe
RawFrame = _stomp_check.RawFrame
Report = _stomp_check.Report
Result = _stomp_check.Result
Target = _stomp_check.Target
Unreachable = _stomp_check.Unreachable
Verdict = _stomp_check.Verdict
Wire = _stomp_check.Wire
case = _stomp_check.case
catalogue = _stomp_check.catalogue
run_check = _stomp_check.run_check
write_html = _stomp_check.write_html
write_json = _stomp_check.write_json
write_junit = _stomp_check.write_junit

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
    "run_check",
    "write_html",
    "write_json",
    "write_junit",
]
