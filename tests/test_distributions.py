"""The satellite distributions of this repository use the core's public names only.

Each folder beside the root holding a ``pyproject.toml`` (stomp-proto-kombu,
stomp-check, ...) is a distribution of its own, released on its own schedule:
a private name of ``stomp_proto`` (a module or a name starting with ``_``) may
change under it in any release.  Every Python file of each - its package, tests,
scripts and benchmarks - is read with ``ast``, so that a lazy import is caught as
well as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SATELLITES = sorted(path.parent for path in ROOT.glob("*/pyproject.toml"))


def private_imports(source: str) -> list[str]:
    """Each import of a private name of stomp_proto in ``source``, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "stomp_proto" and any(part.startswith("_") for part in parts[1:]):
                found.append(f"{node.lineno}: {name}")
                break
    return found


def test_the_satellites_are_found() -> None:
    names = {path.name for path in SATELLITES}
    assert {"stomp-proto-kombu", "stomp-check", "stomp-proto-channels"} <= names, names


def private_imports_under(folder: Path) -> dict[str, list[str]]:
    """:func:`private_imports` of each Python file under ``folder``, by its path there."""
    sources = sorted(folder.rglob("*.py"))
    assert sources, f"no Python file under {folder}"
    return {
        str(path.relative_to(folder)): found
        for path in sources
        if (found := private_imports(path.read_text(encoding="utf-8")))
    }


@pytest.mark.parametrize("folder", SATELLITES, ids=lambda path: path.name)
def test_a_satellite_imports_no_private_name_of_the_core(folder: Path) -> None:
    problems = private_imports_under(folder)
    assert not problems, f"private names of stomp_proto imported: {problems}"


def test_the_check_sees_a_private_import_deep_in_a_folder(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("from stomp_proto import Frame\n")
    (tmp_path / "pkg" / "sub" / "late.py").write_text(
        "def f():\n    import stomp_proto._decoder as d\n    return d\n"
    )
    assert private_imports_under(tmp_path) == {"pkg/sub/late.py": ["2: stomp_proto._decoder"]}


@pytest.mark.parametrize(
    "source",
    [
        "from stomp_proto._frame import VERSIONS",
        "from stomp_proto._client._errors import reason",
        "import stomp_proto._build",
        "from stomp_proto import _websocket",
        "from stomp_proto.broker import _core",
        "from stomp_proto.check import _FOO as FOO",
        "def later():\n    from stomp_proto.broker._server import serve\n",
    ],
)
def test_the_check_sees_a_private_import(source: str) -> None:
    assert private_imports(source)


@pytest.mark.parametrize(
    "source",
    [
        "from stomp_proto import FrameDecoder, Version",
        "import stomp_proto.threads",
        "from stomp_proto.websocket import ClientHandshake",
        "from stomp_check._wire import build",  # a satellite's own private names are its own
        "from ._case import Case",
        "import stomp_protocol._x",
    ],
)
def test_the_check_passes_public_imports(source: str) -> None:
    assert not private_imports(source)
