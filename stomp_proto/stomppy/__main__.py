"""``python -m stomp_proto.stomppy``: stomp.py's command-line client (``python -m stomp``).

The client is :mod:`stomp_proto.stomppy.cli`; its names are here too, where stomp.py
programs import them (``from stomp.__main__ import StompCLI``).
"""

from __future__ import annotations

import sys

from .cli import StompCLI, main

__all__ = ["StompCLI", "main"]

if __name__ == "__main__":
    sys.exit(main())
