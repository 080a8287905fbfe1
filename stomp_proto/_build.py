"""Which build of the sans-IO core is loaded: the pure-Python one or the compiled one.

The core's modules (:data:`CORE_MODULES`) can be compiled with mypyc
(``scripts/build_mypyc.py``); a compiled module is an extension module next to
its ``.py`` file, and Python imports it in place of the source.  Where none
was built, the same import finds the ``.py`` file: the pure-Python sources are
the one source and the reference, the compiled build only runs them faster.
"""

from __future__ import annotations

import sys
from importlib.machinery import EXTENSION_SUFFIXES
from typing import Literal, TypeVar

__all__ = ["CORE_MODULES", "BuildName", "interpreted", "loaded_build"]

_C = TypeVar("_C", bound=type)

BuildName = Literal["pure", "compiled", "mixed"]

#: The modules that scripts/build_mypyc.py compiles, in an order that imports cleanly.
CORE_MODULES = (
    "stomp_proto._build",
    "stomp_proto._limits",
    "stomp_proto._protocol_errors",
    "stomp_proto._checks",
    "stomp_proto._frame",
    "stomp_proto._events",
    "stomp_proto._errors",
    "stomp_proto._headers",
    "stomp_proto._decoder",
    "stomp_proto._encoder",
    "stomp_proto._state",
    "stomp_proto._heartbeat",
    "stomp_proto._connection",
    "stomp_proto._client._core",
)


def interpreted(cls: _C) -> _C:
    """Keep ``cls`` an ordinary Python class when mypyc compiles its module.

    mypyc turns each class it can into a native (C) class: faster, but it has
    no ``__slots__`` or ``__dict__``, cannot be subclassed by Python code, and
    treats ``frozen``, pickling and ``dataclasses`` helpers its own way.  A
    class with a decorator mypyc does not know stays a Python class (its
    methods are still compiled), so the public value classes - events,
    exceptions, options - carry this one and behave the same in both builds.
    At run time it does nothing.
    """
    return cls


def _is_compiled(name: str) -> bool:
    path = getattr(sys.modules[name], "__file__", None) or ""
    return path.endswith(tuple(EXTENSION_SUFFIXES))


def loaded_build() -> BuildName:
    """``"compiled"`` when every core module was loaded from an extension module,
    ``"pure"`` when none was, ``"mixed"`` otherwise (a partial or broken build).

    Asked by ``stomp_proto/__init__.py`` once it has imported the core (this module
    imports none of it: everything else imports this one).
    """
    compiled = {_is_compiled(name) for name in CORE_MODULES}
    if compiled == {True}:
        return "compiled"
    if compiled == {False}:
        return "pure"
    return "mixed"
