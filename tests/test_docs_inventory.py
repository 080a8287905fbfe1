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
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_api_documented import PUBLIC_MODULES

import stomp_proto

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
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh HTML build of docs/: its directory.

    ``STOMP_PROTO_DOCS_HTML`` names one already made from this checkout (scripts/test.sh
    builds the site once, with ``-E``, and runs this module right after).
    """
    built = os.environ.get("STOMP_PROTO_DOCS_HTML")
    if built:
        assert (Path(built) / "objects.inv").is_file(), f"no site built in {built}"
        return Path(built)
    if importlib.util.find_spec("sphinx") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true and Sphinx is not installed (the dev extra has it)")
        pytest.skip("Sphinx is not installed (pip install -e '.[dev]' or '.[docs]')")
    out = tmp_path_factory.mktemp("docs")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(DOCS), str(out / "html")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out / "html"


@pytest.fixture(scope="module")
def inventory(site: Path) -> set[str]:
    """The Python names in the build's ``objects.inv``."""
    from sphinx.util.inventory import InventoryFile

    with (site / "objects.inv").open("rb") as stream:
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


# -- the reference as a reader sees it: the built api.html ----------------------------

#: Builtins whose docstring autodoc shows for a constant or alias that has none
#: of its own ("str(object='') -> str" for ``BUILD``, "Built-in immutable
#: sequence." for ``Headers``).
BUILTINS = (str, bytes, int, float, bool, tuple, list, dict, set, frozenset, object, type)
#: What every exception inherits from Python, not worth a reader's time.
EXCEPTION_MACHINERY = ("add_note", "with_traceback", "args")
#: Kinds of entries that have parameters.
CALLABLE_KINDS = {"class", "exception", "function", "method", "classmethod", "staticmethod"}


@pytest.fixture(scope="module")
def reference(site: Path) -> Any:
    """api.html, parsed (BeautifulSoup comes with the furo theme the site needs)."""
    bs4 = pytest.importorskip("bs4")
    return bs4.BeautifulSoup((site / "api.html").read_text(encoding="utf-8"), "html.parser")


def entries(soup: Any, kinds: set[str]) -> Iterator[tuple[str, Any, Any]]:
    """``(id, signature, description)`` of each object entry of one of ``kinds``."""
    for entry in soup.find_all("dl", class_="py"):
        if kinds & set(entry["class"]):
            signature = entry.find("dt", recursive=False)
            description = entry.find("dd", recursive=False)
            if signature is not None and signature.get("id"):
                yield signature["id"], signature, description


def own_text(description: Any) -> tuple[dict[str, str], list[str]]:
    """An entry's own words, without its members': the ``Parameters`` field
    (name -> words) and the inline literals of the rest (````strict=False````)."""
    fields: dict[str, str] = {}
    literals: list[str] = []
    for part in description.find_all(recursive=False):
        if part.name == "dl" and "py" in part.get("class", []):
            continue  # a member's entry
        if part.name == "dl" and "field-list" in part.get("class", []):
            for item in part.find_all("p"):
                name = item.find("strong")
                if name is not None and "\u2013" in item.get_text():
                    fields[name.get_text()] = item.get_text().split("\u2013", 1)[1].strip()
        literals += [code.get_text() for code in part.find_all("code")]
    return fields, literals


def described_members(description: Any) -> set[str]:
    """The members (attributes, fields) of an entry that have words of their own."""
    found = set()
    for _, signature, words in entries(description, {"attribute", "property", "method"}):
        if words.get_text(strip=True):
            found.add(signature["id"].rsplit(".", 1)[-1])
    return found


def resolve(ident: str) -> object:
    """The object an entry documents, from its id (``stomp_proto.ErrorKind``)."""
    module_name, _, rest = ident.partition(".")
    obj: object = importlib.import_module(module_name)
    for part in rest.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(f"{getattr(obj, '__name__', '')}.{part}")
    return obj


def test_every_parameter_is_described(reference: Any) -> None:
    """Each parameter of a function, method or constructor has words: a field of
    its own, a mention in the text (````strict=False````), or its attribute's entry."""
    undescribed = []
    checked = 0
    for ident, signature, description in entries(reference, CALLABLE_KINDS):
        names = [
            param.find("span", class_="n").get_text()
            for param in signature.find_all("em", class_="sig-param")
            if param.find("span", class_="n") is not None
        ]
        if names and isinstance(obj := resolve(ident), type) and issubclass(obj, enum.Enum):
            continue  # ErrorKind(value): Enum's lookup by value, not a constructor
        fields, literals = own_text(description)
        members = described_members(description)
        for name in names:
            checked += 1
            mentioned = any(re.search(rf"(?<![\w.]){re.escape(name)}\b", text) for text in literals)
            if not (fields.get(name) or mentioned or name in members):
                undescribed.append(f"{ident}({name})")
    assert checked > 150  # the parameters were found at all
    assert not undescribed, f"parameters with a name and a type but no words: {undescribed}"


def test_every_enum_member_is_described(reference: Any) -> None:
    """``ErrorKind.BAD_HEADER`` says when it is raised, not only its value."""
    bare = []
    checked = 0
    for ident, _, description in entries(reference, {"attribute"}):
        owner, _, name = ident.rpartition(".")
        cls = resolve(owner)
        if isinstance(cls, type) and issubclass(cls, enum.Enum) and name in cls.__members__:
            checked += 1
            if not description.get_text(strip=True):
                bare.append(ident)
    assert checked >= len(stomp_proto.ErrorKind)
    assert not bare, f"enum members without a description: {bare}"


def test_no_builtin_docstring_or_exception_machinery_is_shown(reference: Any) -> None:
    """Constants and aliases show their own words, exceptions their own members."""
    text = reference.get_text()
    borrowed = [
        first
        for builtin in BUILTINS
        if builtin.__doc__ and (first := inspect.cleandoc(builtin.__doc__).splitlines()[0]) in text
    ]
    assert not borrowed, f"builtin docstrings on the reference page: {borrowed}"
    machinery = [
        ident
        for ident, _, _ in entries(reference, {"method", "attribute", "property"})
        if ident.rsplit(".", 1)[-1] in EXCEPTION_MACHINERY
    ]
    assert not machinery, f"Python's exception machinery listed as members: {machinery}"
    for constant in ("BUILD", "DRAIN_TIMEOUT", "DRAIN_BYTES", "Headers"):
        ident = f"stomp_proto.{constant}"
        found = [words for name, _, words in entries(reference, {"data"}) if name == ident]
        assert found and found[0].get_text(strip=True), f"{constant} has no description"


#: Pages that keep the project's history, and may name the files it changed.
HISTORY_PAGES = {"changelog.html", "benchmark-methodology.html", "fuzzing-log.html"}


def test_no_page_points_at_a_source_file_for_documentation(site: Path) -> None:
    """ "see docs/connection.rst" is a link on the site, not a file name."""
    found = [
        f"{page.name}: {match.group()}"
        for page in site.glob("*.html")
        if page.name not in HISTORY_PAGES
        for match in re.finditer(r"docs/[\w-]+\.rst", page.read_text(encoding="utf-8"))
    ]
    assert not found, found
