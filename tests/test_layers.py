"""The layers stay layers: the sans-IO core never reaches up into what is built on it.

The core - frames, codec, events, states, the connection, heart-beats,
limits, errors, and the sans-IO WebSocket half - must work without the
clients, the broker, the Spark data source or the CLI, and must never
import them, not even inside a function.  Read from each module's source,
so that a lazy import is caught as well as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "stomp_proto"

CORE = (
    "_frame",
    "_events",
    "_state",
    "_connection",
    "_decoder",
    "_headers",
    "_encoder",
    "_errors",
    "_heartbeat",
    "_limits",
    "_websocket",
    "_protocol_errors",
    "_build",
)

#: What is built on the core.
UPPER = (
    "stomp_proto._client",
    "stomp_proto.asyncio",
    "stomp_proto.trio",
    "stomp_proto.threads",
    "stomp_proto.broker",
    "stomp_proto.spark",
    "stomp_proto._cli",
    "stomp_proto.__main__",
)


def imported_modules(path: Path, package: str) -> set[str]:
    """Every module ``path`` imports, absolute, at any depth of its code."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            # "from . import threads" names a module too.
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def reaches_up(module: str) -> bool:
    return any(module == upper or module.startswith(upper + ".") for upper in UPPER)


@pytest.mark.parametrize("name", CORE)
def test_core_module_imports_nothing_built_on_it(name: str) -> None:
    path = PACKAGE / f"{name}.py"
    assert path.exists(), f"core module {name} moved: update CORE"
    upward = sorted(m for m in imported_modules(path, "stomp_proto") if reaches_up(m))
    assert not upward, f"stomp_proto.{name} imports {upward}"


#: The sans-IO core's modules, for the cycle check (the WebSocket half aside).
CORE_MODULES = (
    *(f"stomp_proto.{name}" for name in CORE if name != "_websocket"),
    "stomp_proto._client._core",
)


def test_the_core_has_no_import_cycle() -> None:
    # Not even a lazy one or one for type checking only: each module of the core
    # imports only modules below it (_errors and _events once imported each other).
    # The native module (_speedups.pyx) is the exception by design: it imports the
    # events it builds, and they look it up once they are defined.
    graph = {
        name: {
            m
            for m in imported_modules(
                PACKAGE.parent.joinpath(*name.split(".")).with_suffix(".py"),
                name.rpartition(".")[0],
            )
            if m in CORE_MODULES and m != name
        }
        for name in CORE_MODULES
    }
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle: {' -> '.join((*path, name))}"
        if name not in done:
            for imported in sorted(graph[name]):
                visit(imported, (*path, name))
            done.add(name)

    for name in CORE_MODULES:
        visit(name, ())
    assert graph["stomp_proto._client._core"] >= {"stomp_proto._connection"}


def test_backend_interfaces_import_no_client() -> None:
    # The neutral module: clients and backends depend on it, it on none of them
    # (the client core's ConnectOptions is only a type it names).
    path = PACKAGE / "_client" / "_backend.py"
    imports = imported_modules(path, "stomp_proto._client")
    core = "stomp_proto._client._core"
    upward = sorted(m for m in imports if reaches_up(m) and not m.startswith(core))
    assert not upward, f"stomp_proto._client._backend imports {upward}"


def test_the_check_sees_a_lazy_upward_import(tmp_path: Path) -> None:
    # The test above must be able to fail: a function-level import is found.
    source = tmp_path / "_frame.py"
    source.write_text("def f():\n    from .broker import Broker\n    from . import threads\n")
    imports = imported_modules(source, "stomp_proto")
    assert reaches_up("stomp_proto.broker") and "stomp_proto.broker" in imports
    assert "stomp_proto.threads" in imports
