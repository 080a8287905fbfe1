"""Terminal colours for printed output, empty on Windows (stomp.py's ``stomp.colours``)."""

from __future__ import annotations

import platform

__all__ = ["BOLD", "GREEN", "NO_COLOUR", "RED"]

_PLAIN = platform.system() == "Windows"  # its console shows the escape codes as text

GREEN = "" if _PLAIN else "\x1b[32m"
RED = "" if _PLAIN else "\x1b[31m"
BOLD = "" if _PLAIN else "\x1b[1m"
NO_COLOUR = "" if _PLAIN else "\x1b[0m"
