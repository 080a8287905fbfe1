"""The built API reference has an entry for every public name and every public member.

tests/test_api_documented.py reads the directives in docs/*.rst; this test builds the
site with Sphinx (into a temporary directory, about 10-40 s) and reads what the build
actually produced - its ``objects.inv``, the index intersphinx and the search use.  A
name in a public module's ``__all__``, or a public method, property, field or
attribute of a public class, that does not appear there fails the test: an
``autoclass`` that renders no members (a private base class, an unimportable optional
dependency) would pass the other test and fail this one.  ``:members:`` renders only
members with a docstring or a ``#:`` comment, so an entry here is also a described one
(docs/api.rst uses ``:undoc-members:`` for ``ErrorKind`` alone, whose values are text).

Needs Sphinx (the ``dev`` or ``docs`` extra): skipped without it, failed without it
under ``CI=true``.
"""

from __future__ import annotations

import ast
import enum
import importlib
import importlib.util
import inspect
import os
import posixpath
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_api_documented import PUBLIC_MODULES

DOCS = Path(__file__).resolve().parent.parent / "docs"

#: Special methods users call through syntax, documented like the others.
USER_DUNDERS = frozenset({"__iter__", "__aiter__"})

#: Roles an inventory entry of the Python domain may have.
PY_ROLES = (
    "py:module",
    "py:class",
    "py:exception",
    "py:function",
    "py:method",
    "py:classmethod",
    "py:staticmethod",
    "py:attribute",
    "py:property",
    "py:data",
)


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The Python names in the ``objects.inv`` of a fresh build of docs/."""
    if importlib.util.find_spec("sphinx") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true and Sphinx is not installed (the dev extra has it)")
        pytest.skip("Sphinx is not installed (pip install -e '.[dev]' or '.[docs]')")
    from sphinx.util.inventory import InventoryFile

    out = tmp_path_factory.mktemp("docs")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(DOCS), str(out / "html")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with (out / "html" / "objects.inv").open("rb") as stream:
        data = InventoryFile.load(stream, "", posixpath.join)
    return {name for role in PY_ROLES for name in data.get(role, {})}


def _public_names() -> Iterator[tuple[str, object]]:
    """``(module.name, object)`` for every name in a public module's ``__all__``.

    An object a module cannot give (a Spark class without pyspark) comes as ``None``.
    """
    for module_name in PUBLIC_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # trio is an optional extra
            module = None
        names = module.__all__ if module is not None else _all_of(module_name)
        for name in names:
            try:
                obj = getattr(module, name)
            except (AttributeError, ImportError):
                obj = None
            yield f"{module_name}.{name}", obj


def _all_of(module_name: str) -> list[str]:
    """The ``__all__`` of a module that cannot be imported, read from its source."""
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{module_name} has no __all__")


def _instance_attributes(klass: type) -> set[str]:
    """Public attributes ``klass.__init__`` sets on ``self`` (``self.unsolicited = ...``)."""
    init = vars(klass).get("__init__")
    if not inspect.isfunction(init):
        return set()
    try:
        source = textwrap.dedent(inspect.getsource(init))
    except (OSError, TypeError):
        return set()
    found = set()
    for node in ast.walk(ast.parse(source)):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and not target.attr.startswith("_")
            ):
                found.add(target.attr)
    return found


def public_members(cls: type) -> set[str]:
    """What users of ``cls`` reach: the public methods, properties, fields and
    attributes that this package's classes define (inherited ones included), and the
    iteration methods.  What Python, ``Exception``, ``Enum``, ``NamedTuple`` or pyspark
    give every such class is left out."""
    members: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("stomp_proto"):
            continue
        names = set(vars(klass)) | set(vars(klass).get("__annotations__", {}))
        names |= _instance_attributes(klass)
        for name in names:
            if name.startswith("_") and name not in USER_DUNDERS:
                continue
            if issubclass(cls, tuple) and name in ("count", "index"):
                continue
            members.add(name)
    if issubclass(cls, enum.Enum):
        # The members (IDLE, CONNECTED ...) are documented; Enum's machinery is not.
        members = {name for name in members if name in cls.__members__}
    return members


def _canonical(public: list[tuple[str, object]]) -> dict[int, str]:
    """id -> the first public name of each object (where a re-export is documented)."""
    first: dict[int, str] = {}
    for qualified, obj in public:
        if obj is not None:
            first.setdefault(id(obj), qualified)
    return first


def test_every_public_name_is_in_the_inventory(inventory: set[str]) -> None:
    public = list(_public_names())
    canonical = _canonical(public)
    missing = [
        qualified
        for qualified, obj in public
        if qualified not in inventory and canonical.get(id(obj)) not in inventory
    ]
    assert not missing, f"public names with no entry in the built docs: {missing}"


def test_every_public_member_is_in_the_inventory(inventory: set[str]) -> None:
    public = list(_public_names())
    canonical = _canonical(public)
    missing: list[str] = []
    checked = 0
    for qualified, obj in public:
        if not isinstance(obj, type) or canonical[id(obj)] != qualified:
            continue
        for member in sorted(public_members(obj)):
            checked += 1
            if f"{qualified}.{member}" not in inventory:
                missing.append(f"{qualified}.{member}")
    assert checked > 200  # the check looked at the members at all
    assert not missing, f"public members with no entry in the built docs: {missing}"


def test_the_connections_methods_are_indexed(inventory: set[str]) -> None:
    """The issue that started this test: ClientConnection's engine is a private base class."""
    for cls in ("ClientConnection", "ServerConnection"):
        for member in ("send", "receive_data", "next_event", "__iter__", "get_timer", "state"):
            assert f"stomp_proto.{cls}.{member}" in inventory


def test_public_members_sees_inherited_and_instance_attributes() -> None:
    """The inspection itself: the cases the reference has to cover are found."""
    import stomp_proto

    assert {"send", "next_event", "__iter__", "ack", "pending_receipts"} <= public_members(
        stomp_proto.ClientConnection
    )
    assert "with_traceback" not in public_members(stomp_proto.BrokerError)
    assert "message" in public_members(stomp_proto.BrokerError)
    assert public_members(stomp_proto.ConnectionState) == set(
        stomp_proto.ConnectionState.__members__
    )
    assert {"command", "headers", "body"} <= public_members(stomp_proto.Frame)
    assert "count" not in public_members(stomp_proto.Frame)
    import stomp_proto.threads

    # Set in __init__, documented with a ``#:`` comment there.
    assert "unsolicited" in public_members(stomp_proto.threads.Client)
