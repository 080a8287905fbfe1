"""The layer's logger, with the module-level helpers stomp.py programs call.

Records go to the ``stomp_proto.stomppy`` logger.  Frames are logged at DEBUG
with the passcode masked (stomp.py logs it in clear).
"""

from __future__ import annotations

import logging as _logging
import sys

__all__ = [
    "DEBUG",
    "INFO",
    "debug",
    "error",
    "info",
    "isEnabledFor",
    "log_to_stdout",
    "setLevel",
    "verbose",
    "warning",
]

DEBUG = _logging.DEBUG
INFO = _logging.INFO

#: Kept for programs that set it; the layer logs tracebacks at DEBUG either way.
verbose = False

_logger = _logging.getLogger("stomp_proto.stomppy")
debug = _logger.debug
info = _logger.info
warning = _logger.warning
error = _logger.error
isEnabledFor = _logger.isEnabledFor
setLevel = _logger.setLevel


def log_to_stdout(verbose_logging: bool = True) -> None:
    """Send the layer's records, DEBUG and up, to standard output."""
    global verbose
    handler = _logging.StreamHandler(sys.stdout)
    handler.setFormatter(_logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    _logger.addHandler(handler)
    _logger.setLevel(_logging.DEBUG)
    verbose = verbose_logging
