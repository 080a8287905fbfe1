"""Public classes defined in private modules carry the public module's name.

``stomp_proto.ConnectionLost`` is defined in ``stomp_proto._client._core``; a
traceback or a ``repr`` of the class should show the name users import, so the
public module sets ``__module__`` on what it re-exports.  :data:`DEFINED_IN`
keeps the module that holds the source, for tools that read it (Sphinx finds
the ``#:`` comments of attributes through ``__module__``: docs/conf.py puts
these back while it builds).

Dataclasses, NamedTuples and TypedDicts keep their own ``__module__``:
``typing.get_type_hints`` resolves their string annotations (``ClassVar``,
``Headers``) in the namespace that ``__module__`` names.
"""

from __future__ import annotations

__all__ = ["DEFINED_IN", "present_as"]

#: Each class :func:`present_as` renamed, and the module that defines it.
DEFINED_IN: dict[type, str] = {}


def present_as(module: str, *classes: type) -> None:
    """Give ``classes`` the public ``module`` as their ``__module__`` (once)."""
    for cls in classes:
        if cls in DEFINED_IN:
            continue
        original = cls.__module__
        try:
            cls.__module__ = module
        except (AttributeError, TypeError):  # an extension type refuses
            continue
        DEFINED_IN[cls] = original
