"""Every public name - each ``__all__`` of the package and its public subpackages -
has an entry in the Sphinx documentation (docs/*.rst), under its own name or, for
a re-export, where the object is defined."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PUBLIC_MODULES = [
    "stomp_proto",
    "stomp_proto.asyncio",
    "stomp_proto.trio",
    "stomp_proto.threads",
    "stomp_proto.broker",
    "stomp_proto.spark",
]
_DIRECTIVE = re.compile(
    r"^\.\. (?:py:)?(auto)?(module|currentmodule|class|function|data|exception|attribute|method)"
    r"::\s*([\w.]+)",
    re.MULTILINE,
)


def documented_names() -> set[str]:
    """Fully qualified names that some directive documents."""
    names: set[str] = set()
    for path in sorted(DOCS.glob("*.rst")):
        text = path.read_text(encoding="utf-8")
        current = ""
        for match in _DIRECTIVE.finditer(text):
            auto, kind, target = match.groups()
            if kind in ("module", "currentmodule"):
                current = target
                if auto:  # automodule :members: documents its __all__
                    options = text[match.end() :].split("\n\n")[0]
                    listed = re.search(r":members:(.*)", options)
                    if listed is not None:
                        members = [m.strip() for m in listed.group(1).split(",") if m.strip()]
                        if not members:  # all of them
                            members = list(importlib.import_module(target).__all__)
                        names.update(f"{target}.{m}" for m in members)
                continue
            qualified = target if "." in target and target.startswith("stomp_proto") else (
                f"{current}.{target}" if current else target
            )
            names.add(qualified)
    return names


def resolve(qualified: str) -> object:
    """The object a dotted name stands for (``None`` if there is none)."""
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute, None)
        return obj
    return None


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_is_documented(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # trio and pyspark are optional extras
        pytest.skip(f"{module_name}: {exc}")
    documented = documented_names()
    # A re-export (stomp_proto.asyncio.ConnectionLost) is documented where it is defined.
    documented_objects = {id(resolve(name)) for name in documented}
    missing = [
        name
        for name in module.__all__
        if f"{module_name}.{name}" not in documented
        and id(getattr(module, name)) not in documented_objects
    ]
    assert not missing, f"{module_name}: not in docs/*.rst: {missing}"
