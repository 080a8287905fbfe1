"""Which build of the sans-IO core is loaded: the pure-Python one or the accelerated one.

The accelerated build adds five extension modules (Cython), each the native twin
of the pure module beside it, as aiohttp pairs ``_http_parser.pyx`` with
``http_parser.py``:

=========================  ==========================  =================================
pure module                native twin                 what the twin does
=========================  ==========================  =================================
``_decoder.py``            ``_decoder_native.pyx``     ``FrameDecoder.next_frame``
``_events.py``             ``_events_native.pyx``      ``FrameEvent.from_frame``
``_encoder.py``            ``_encoder_native.pyx``     ``FrameEncoder.encode``
``_connection.py``         ``_connection_native.pyx``  a client's per-message steps
``spark/...`` (below)      ``_streams_native.pyx``     a Spark read task's per-row steps
=========================  ==========================  =================================

The last one mirrors two loops of the Spark package, ``collect_messages`` in
``spark/_streams/_messages.py`` and ``StreamRows.add`` in ``spark/_schema.py``;
it sits here with the others, since the build makes them all or none.

They share ``_native_shared.pxd`` (C helpers), and each declares in its ``TOUCHES``
the private attributes of the pure classes it reads or writes
(``scripts/build_accelerated.py`` compiles them).  Each pure module picks its twin
at import through :func:`native`, and runs its own code for whatever the twin
leaves to it.  The build is all or nothing: where any twin was not built, or
``STOMP_PROTO_NO_EXTENSIONS`` is set to a non-empty value, every module runs the
pure-Python source alone - the reference, and the fallback.

An install from source builds the extension modules whenever a C compiler is
there (``hatch_build.py``); when it could not, the wheel records why, and
:func:`describe` (``python -m stomp_proto --version``) repeats it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType
from typing import Literal

__all__ = ["NATIVE_MODULES", "BuildName", "describe", "loaded_build", "native"]


BuildName = Literal["pure", "accelerated"]

#: The environment variable that keeps the pure-Python build even where the
#: extension modules are installed (for comparisons and for debugging).
NO_EXTENSIONS = "STOMP_PROTO_NO_EXTENSIONS"

#: Where the build hook records, in a pure wheel, why it did not build the modules.
INSTALL_NOTE = "extra_metadata/native-build.txt"

#: The native twins, as module names under stomp_proto.
NATIVE_MODULES = (
    "_decoder_native",
    "_events_native",
    "_encoder_native",
    "_connection_native",
    "_streams_native",
)

_complete: bool | None = None


def _all_built() -> bool:
    """Whether every twin is there to import (found, not imported: they import the core)."""
    global _complete
    if _complete is None:
        _complete = not os.environ.get(NO_EXTENSIONS) and all(
            importlib.util.find_spec(f"{__package__}.{name}") is not None for name in NATIVE_MODULES
        )
    return _complete


def native(name: str) -> ModuleType | None:
    """The native twin ``name`` (one of NATIVE_MODULES), or ``None`` for the pure build."""
    if not _all_built():
        return None
    return importlib.import_module(f"{__package__}.{name}")


def loaded_build() -> BuildName:
    """``"accelerated"`` when the extension modules are in use, ``"pure"`` otherwise.

    Asked by ``stomp_proto/__init__.py`` once it has imported the core.
    """
    return "accelerated" if _all_built() else "pure"


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
    if _all_built():
        return "accelerated build"
    if os.environ.get(NO_EXTENSIONS):
        return f"pure build: {NO_EXTENSIONS} is set"
    package = Path(__file__).resolve().parent
    present = [
        name
        for name in NATIVE_MODULES
        if any((package / f"{name}{suffix}").exists() for suffix in EXTENSION_SUFFIXES)
    ]
    if present:
        return (
            f"pure build: only {len(present)} of the {len(NATIVE_MODULES)} native modules "
            "are there (the build is all or nothing)"
        )
    note = _install_note()
    if note:
        return f"pure build: {note}"
    return "pure build: this copy has no native modules (a pure wheel, or the sources)"
