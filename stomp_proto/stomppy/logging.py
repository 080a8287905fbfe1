"""stomp.py 8's name for :mod:`stomp_proto.stomppy.log` (the same logger)."""

from __future__ import annotations

from .log import (
    DEBUG,
    INFO,
    debug,
    error,
    info,
    isEnabledFor,
    log_to_stdout,
    setLevel,
    verbose,
    warning,
)

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
