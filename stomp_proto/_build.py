"""Which build of the sans-IO core is loaded: the pure-Python one or the accelerated one.

The accelerated build adds one extension module, ``stomp_proto._speedups``
(Cython, from ``_speedups.pyx``; ``scripts/build_accelerated.py`` compiles it),
under the hot path: the decoder, the events received most and the encoder
ask it first and run their own code for whatever it leaves to them.  The
modules that own each pure implementation pick it at import through
:func:`native`, as aiohttp picks its C HTTP parser: where it was not built,
or ``STOMP_PROTO_NO_EXTENSIONS`` is set to a non-empty value, they run the
pure-Python source alone - the reference, and the fallback.

An install from source builds the extension module whenever a C compiler is
there (``hatch_build.py``); when it could not, the wheel records why, and
:func:`describe` (``python -m stomp_proto --version``) repeats it.
"""

from __future__ import annotations

import importlib
import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType
from typing import Literal

__all__ = ["BuildName", "describe", "loaded_build", "native"]


BuildName = Literal["pure", "accelerated"]

#: The environment variable that keeps the pure-Python build even where the
#: extension module is installed (for comparisons and for debugging).
NO_EXTENSIONS = "STOMP_PROTO_NO_EXTENSIONS"

#: Where the build hook records, in a pure wheel, why it did not build the module.
INSTALL_NOTE = "extra_metadata/native-build.txt"

_native: ModuleType | None = None
_looked = False
_import_error: ImportError | None = None


def native() -> ModuleType | None:
    """The extension module, or ``None`` for the pure-Python build (asked once, then kept)."""
    global _native, _looked, _import_error
    if not _looked:
        _looked = True
        if not os.environ.get(NO_EXTENSIONS):
            try:
                _native = importlib.import_module("._speedups", __package__)
            except ImportError as exc:
                _native, _import_error = None, exc
    return _native


def loaded_build() -> BuildName:
    """``"accelerated"`` when the extension module is in use, ``"pure"`` otherwise.

    Asked by ``stomp_proto/__init__.py`` once it has imported the core.
    """
    return "pure" if native() is None else "accelerated"


def _install_note() -> str | None:
    """What the install of this very copy of the package recorded about its native build."""
    # Here, not at the top: importlib.metadata brings in email, and email brings socket.
    from importlib import metadata

    package = Path(__file__).resolve().parent
    try:
        dist = metadata.distribution("stomp-proto")
        # Another copy (a checkout on sys.path beside an install) has no say here.
        if Path(str(dist.locate_file("stomp_proto"))).resolve() != package:
            return None
        note = dist.read_text(INSTALL_NOTE)
    except (metadata.PackageNotFoundError, OSError):
        return None
    return note.strip() if note else None


def describe() -> str:
    """Which build runs and, for the pure one, why: ``"accelerated build"``,
    ``"pure build: STOMP_PROTO_NO_EXTENSIONS is set"``, and so on."""
    if native() is not None:
        return "accelerated build"
    if os.environ.get(NO_EXTENSIONS):
        return f"pure build: {NO_EXTENSIONS} is set"
    package = Path(__file__).resolve().parent
    if _import_error is not None and any(
        (package / f"_speedups{suffix}").exists() for suffix in EXTENSION_SUFFIXES
    ):
        return f"pure build: the native module is there but did not load ({_import_error})"
    note = _install_note()
    if note:
        return f"pure build: {note}"
    return "pure build: this copy has no native module (a pure wheel, or the sources)"
