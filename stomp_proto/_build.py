"""Which build of the sans-IO core is loaded: the pure-Python one or the accelerated one.

The accelerated build adds one extension module, ``stomp_proto._speedups``
(Cython, from ``_speedups.pyx``; ``scripts/build_accelerated.py`` compiles it),
under the hot path: the decoder, the events received most and the encoder
ask it first and run their own code for whatever it leaves to them.  The
modules that own each pure implementation pick it at import through
:func:`native`, as aiohttp picks its C HTTP parser: where it was not built,
or ``STOMP_PROTO_NO_EXTENSIONS`` is set to a non-empty value, they run the
pure-Python source alone - the reference, and the fallback.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Literal

__all__ = ["BuildName", "loaded_build", "native"]


BuildName = Literal["pure", "accelerated"]

#: The environment variable that keeps the pure-Python build even where the
#: extension module is installed (for comparisons and for debugging).
NO_EXTENSIONS = "STOMP_PROTO_NO_EXTENSIONS"

_native: ModuleType | None = None
_looked = False


def native() -> ModuleType | None:
    """The extension module, or ``None`` for the pure-Python build (asked once, then kept)."""
    global _native, _looked
    if not _looked:
        _looked = True
        if not os.environ.get(NO_EXTENSIONS):
            try:
                _native = importlib.import_module("._speedups", __package__)
            except ImportError:
                _native = None
    return _native


def loaded_build() -> BuildName:
    """``"accelerated"`` when the extension module is in use, ``"pure"`` otherwise.

    Asked by ``stomp_proto/__init__.py`` once it has imported the core.
    """
    return "pure" if native() is None else "accelerated"
