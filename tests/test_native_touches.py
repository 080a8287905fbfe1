"""The native twins declare every private attribute of the pure classes that they touch.

Each ``stomp_proto/_*_native.pyx`` reads and writes some private attributes of the
pure classes it mirrors (the decoder's buffer and offsets, a connection's state...)
and names them in its module-level ``TOUCHES``.  These tests need no build: they read
the ``.pyx`` sources, so that a renamed attribute fails here, in the pure build's
quick loop, and not only once the native code is compiled and run.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from stomp_proto import ClientConnection, FrameDecoder, FrameEncoder, Message
from stomp_proto._build import NATIVE_MODULES

PACKAGE = Path(__file__).resolve().parent.parent / "stomp_proto"


def owners() -> dict[str, object]:
    """An object of each class that a twin may name in TOUCHES, as the twin meets it."""
    conn = ClientConnection()
    return {
        "FrameDecoder": FrameDecoder(),
        "FrameEncoder": FrameEncoder("1.2"),
        "FrameEvent": Message,
        "ClientConnection": conn,
        "_PendingAcks": conn._pending,
    }


def source(name: str) -> str:
    return (PACKAGE / f"{name}.pyx").read_text()


def touches(name: str) -> dict[str, tuple[str, ...]]:
    """The TOUCHES literal of the twin ``name``, read from its source."""
    found = re.search(r"^TOUCHES = (\{.*?^\}|\{\})$", source(name), re.MULTILINE | re.DOTALL)
    assert found, f"{name}.pyx declares no TOUCHES"
    value = ast.literal_eval(found.group(1))
    assert isinstance(value, dict)
    return value


def code_only(text: str) -> str:
    """The source without docstrings, C blocks, comments and imports."""
    text = re.sub(r'"""(.*?)"""', "", text, flags=re.DOTALL)
    lines = [line.split("#", 1)[0] for line in text.splitlines()]
    return "\n".join(line for line in lines if not line.lstrip().startswith(("from ", "cimport ")))


def private_names(name: str) -> set[str]:
    """The private attributes the code reaches: ``obj._name``, ``getattr(obj, "_name")``."""
    code = code_only(source(name))
    found = set(re.findall(r"\.(_[A-Za-z]\w*)", code))
    found |= set(re.findall(r"getattr\(\s*\w+\s*,\s*\"(_\w+)\"", code))
    return {n for n in found if not n.startswith("__")}


def test_every_twin_is_there() -> None:
    assert sorted(p.stem for p in PACKAGE.glob("*.pyx")) == sorted(NATIVE_MODULES)


@pytest.mark.parametrize("name", NATIVE_MODULES)
def test_every_declared_attribute_exists_on_the_pure_classes(name: str) -> None:
    objects = owners()
    for owner, attributes in touches(name).items():
        assert owner in objects, f"{name}.pyx names {owner}: add it to owners()"
        missing = [a for a in attributes if not hasattr(objects[owner], a)]
        assert not missing, f"{name}.pyx touches {owner}.{missing}, which the pure code lacks"


@pytest.mark.parametrize("name", NATIVE_MODULES)
def test_the_twin_touches_only_what_it_declares(name: str) -> None:
    declared = {a for attributes in touches(name).values() for a in attributes}
    used = private_names(name)
    assert used - declared == set(), f"{name}.pyx touches undeclared {sorted(used - declared)}"
    assert declared - used == set(), f"{name}.pyx declares unused {sorted(declared - used)}"
