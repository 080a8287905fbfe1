"""The layers stay layers: the sans-IO core never reaches up into what is built on it.

The core - frames, codec, events, states, the connection, heart-beats,
limits, errors, and the sans-IO WebSocket half - must work without the
clients, the broker, the Spark data source or the CLI, and must never
import them, not even inside a function.  Read from each module's source,
so that a lazy import is caught as well as a top-level one.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Collection
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
    "_header_map",
    "_encoder",
    "_errors",
    "_heartbeat",
    "_limits",
    "_websocket",
    "_protocol_errors",
    "_checks",
    "_build",
)

#: What is built on the core.
UPPER = (
    "stomp_proto._client",
    "stomp_proto.asyncio",
    "stomp_proto.trio",
    "stomp_proto.threads",
    "stomp_proto.broker",
    "stomp_proto.asgi",
    "stomp_proto.spark",
    "stomp_proto._cli",
    "stomp_proto.__main__",
)


def imported_modules(path: Path, package: str, modules: Collection[str] = ()) -> set[str]:
    """Every module ``path`` imports, absolute, at any depth of its code.

    ``from . import x`` names the module ``x``; it names the package itself too
    (its ``__init__``) unless every name it takes is one of ``modules``: taking a
    submodule needs nothing of the package's ``__init__``.
    """
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
            named = {f"{module}.{alias.name}" for alias in node.names}
            found.update(named)  # "from . import threads" names a module too
            if not modules or not named <= set(modules):
                found.add(module)
    return found


def reaches_up(module: str) -> bool:
    return any(module == upper or module.startswith(upper + ".") for upper in UPPER)


@pytest.mark.parametrize("name", CORE)
def test_core_module_imports_nothing_built_on_it(name: str) -> None:
    path = PACKAGE / f"{name}.py"
    assert path.exists(), f"core module {name} moved: update CORE"
    upward = sorted(m for m in imported_modules(path, "stomp_proto") if reaches_up(m))
    assert not upward, f"stomp_proto.{name} imports {upward}"


def test_no_module_of_the_package_is_in_an_import_cycle() -> None:
    # Not even a lazy one or one for type checking only: each module imports only
    # modules below it.  (_errors and _events once imported each other; so did the
    # client core and its failover list, and the URL parser and the client core.)
    # The native twins (_*_native.pyx) are the exception by design: the events' twin
    # imports the events it builds, and they look it up once they are defined.
    graph = package_graph(PACKAGE, "stomp_proto")
    cycle = import_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle or ())}"
    # The graph is the real one: lazy and type-only edges are in it.
    assert "stomp_proto._connection" in graph["stomp_proto._client._core"]
    assert "stomp_proto._client._errors" in graph["stomp_proto"]  # PEP 562, type-only
    assert "stomp_proto._client._url" in graph["stomp_proto._client._options"]


def test_import_stomp_proto_loads_no_io() -> None:
    # The sans-IO package's top level loads the core only, as `import h11` loads no I/O;
    # the clients' names load on first use.  Counted against a bare interpreter (-S:
    # no site, whose .pth files and sitecustomize may load threading themselves), as
    # what `import stomp_proto` adds to it; the package's own directory and this
    # interpreter's path are given, as site would have found them.
    program = (
        "import sys\n"
        "bare = set(sys.modules)\n"
        "import stomp_proto\n"
        "added = set(sys.modules) - bare\n"
        "io = sorted({'asyncio', 'socket', 'ssl', 'selectors', 'threading'} & added)\n"
        "clients = sorted(m for m in added if m.startswith('stomp_proto._client'))\n"
        "print(io, clients)\n"
        "stomp_proto.ConnectionLost, stomp_proto.BrokerURL\n"
        "print(stomp_proto.ConnectionLost.__module__, 'BrokerURL' in dir(stomp_proto))\n"
    )
    import stomp_proto  # where this run's stomp_proto is: a checkout or an installed wheel

    package_root = str(Path(stomp_proto.__file__).parent.parent)
    path = os.pathsep.join([package_root, *(p for p in sys.path if p)])
    done = subprocess.run(
        [sys.executable, "-S", "-X", "frozen_modules=off", "-c", program],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.stdout.splitlines() == ["[] []", "stomp_proto True"], done.stdout


def import_cycle(graph: dict[str, set[str]]) -> tuple[str, ...] | None:
    """The first import cycle of ``graph`` (module -> modules it imports), or None."""
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
        if name in path:
            return (*path[path.index(name) :], name)
        if name in done:
            return None
        for imported in sorted(graph[name]):
            cycle = visit(imported, (*path, name))
            if cycle is not None:
                return cycle
        done.add(name)
        return None

    for name in sorted(graph):
        cycle = visit(name, ())
        if cycle is not None:
            return cycle
    return None


def package_graph(directory: Path, package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports, for every module under ``directory``.

    Every import counts, lazy or for type checking only.  A package's own
    ``__init__`` is an edge only when a module names it (``from . import X``),
    not for being the parent Python loads first.
    """
    modules: dict[str, Path] = {}
    for path in sorted(directory.rglob("*.py")):
        parts = [package, *path.relative_to(directory).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return {
        name: {
            m
            for m in imported_modules(
                path, name if path.name == "__init__.py" else name.rpartition(".")[0], modules
            )
            if m in modules and m != name
        }
        for name, path in modules.items()
    }


def test_the_spark_package_has_no_import_cycle() -> None:
    # The two families (queue and streams) and what they share beside them import
    # one way only: once the queue's and the streams' data sources imported each other.
    graph = package_graph(PACKAGE / "spark", "stomp_proto.spark")
    cycle = import_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle or ())}"
    # The graph is the real one: the layout's edges are seen, lazy ones included.
    assert "stomp_proto.spark._queue._link" in graph["stomp_proto.spark._queue._reader"]
    assert "stomp_proto.spark._streams._offsets" in graph["stomp_proto.spark._streams._link"]
    assert "stomp_proto.spark._schema" in graph["stomp_proto.spark._streams._reader"]
    assert "stomp_proto.spark._queue._source" in graph["stomp_proto.spark"]
    # Neither family reaches into the other.
    for name, imports in graph.items():
        for family, other in (("_queue", "_streams"), ("_streams", "_queue")):
            if name.startswith(f"stomp_proto.spark.{family}"):
                crossing = sorted(m for m in imports if m.startswith(f"stomp_proto.spark.{other}"))
                assert not crossing, f"{name} imports {crossing}"


def test_the_cycle_check_sees_a_cycle(tmp_path: Path) -> None:
    # The spark test above must be able to fail: a lazy import back into the package's
    # __init__, and a cycle between two sibling subpackages, are both found.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "__init__.py").write_text("def f():\n    from .a._x import X\n")
    (tmp_path / "a" / "__init__.py").write_text("")
    (tmp_path / "a" / "_x.py").write_text("from .. import NAME\n")
    (tmp_path / "b" / "__init__.py").write_text("")
    (tmp_path / "b" / "_y.py").write_text("from ..a import _x\n")
    cycle = import_cycle(package_graph(tmp_path, "pkg"))
    assert cycle == ("pkg", "pkg.a._x", "pkg"), cycle
    (tmp_path / "__init__.py").write_text("")
    assert import_cycle(package_graph(tmp_path, "pkg")) is None
    # Taking a submodule (from . import _x) needs nothing of the package's __init__.
    (tmp_path / "a" / "__init__.py").write_text("def f():\n    from . import _x\n")
    assert import_cycle(package_graph(tmp_path, "pkg")) is None
    (tmp_path / "a" / "_x.py").write_text("from . import NAME\n")
    assert import_cycle(package_graph(tmp_path, "pkg")) == ("pkg.a", "pkg.a._x", "pkg.a")
    (tmp_path / "a" / "__init__.py").write_text("")
    (tmp_path / "a" / "_x.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..b._y import Y\n"
    )
    assert import_cycle(package_graph(tmp_path, "pkg")) == ("pkg.a._x", "pkg.b._y", "pkg.a._x")


def test_backend_interfaces_import_no_client() -> None:
    # The neutral module: clients and backends depend on it, it on none of them
    # (the clients' ConnectOptions is only a type it names).
    path = PACKAGE / "_client" / "_backend.py"
    imports = imported_modules(path, "stomp_proto._client")
    options = "stomp_proto._client._options"
    upward = sorted(m for m in imports if reaches_up(m) and not m.startswith(options))
    assert not upward, f"stomp_proto._client._backend imports {upward}"


def test_the_check_sees_a_lazy_upward_import(tmp_path: Path) -> None:
    # The test above must be able to fail: a function-level import is found.
    source = tmp_path / "_frame.py"
    source.write_text("def f():\n    from .broker import Broker\n    from . import threads\n")
    imports = imported_modules(source, "stomp_proto")
    assert reaches_up("stomp_proto.broker") and "stomp_proto.broker" in imports
    assert "stomp_proto.threads" in imports
