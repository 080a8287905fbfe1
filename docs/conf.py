"""Sphinx configuration for the stomp-proto documentation."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util.nodes import split_explicit_title

# Document the package from this checkout even when it is not installed.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# ... and the checker, a distribution of its own (stomp-check/), likewise.
sys.path.insert(1, str(ROOT / "stomp-check"))
# ... and the Django Channels consumer (stomp-proto-channels/), which needs channels.
sys.path.insert(2, str(ROOT / "stomp-proto-channels"))

# The public classes defined in private modules say ``stomp_proto.ConnectionLost``
# at run time (stomp_proto/_public.py).  Autodoc finds the ``#:`` comments of
# attributes, and viewcode the source, through ``__module__``: while the site is
# built, they name the defining modules again.  The directives give the public
# names, which are the names the pages and the inventory show.
import stomp_check  # noqa: E402
import stomp_proto_channels  # noqa: E402

import stomp_proto.asgi  # noqa: E402
import stomp_proto.asyncio  # noqa: E402
import stomp_proto.broker  # noqa: E402
import stomp_proto.threads  # noqa: E402
import stomp_proto.websocket  # noqa: E402, F401
from stomp_proto._public import DEFINED_IN  # noqa: E402

for _cls, _module in [
    *DEFINED_IN.items(),
    *stomp_check.DEFINED_IN.items(),
    *stomp_proto_channels.DEFINED_IN.items(),
]:
    _cls.__module__ = _module

project = "stomp-proto"
author = "stomp-proto contributors"
copyright = "stomp-proto contributors"

try:
    release = metadata.version("stomp-proto")
except metadata.PackageNotFoundError:
    release = "0.1.0.dev0"
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.viewcode",
]

exclude_patterns = ["_build"]
nitpicky = False

autodoc_typehints = "description"
autodoc_member_order = "bysource"
# Defaults show their values: the private constants they are written with
# (DEFAULT_TOLERANCE, VERSIONS) are nothing a reader can look up.
autodoc_preserve_defaults = False

# The optional extras' packages, when they are not installed (a build with only the
# ``docs`` extra): autodoc imports stomp_proto.trio and the Spark sources against
# stand-ins and documents them all the same.  Installed, they are used as they are.
autodoc_mock_imports = [
    name
    for name in ("trio", "wsproto", "pyspark", "pyarrow")
    if importlib.util.find_spec(name) is None
]

# No doctest_global_setup: every ``>>>`` fragment imports what it uses, so that it
# runs pasted into a fresh interpreter (tests/test_docs_pages.py runs each alone).

# The one place the pages take the repository's address from: pyproject.toml's
# [project.urls], which PyPI shows too.  ``|repository|`` in a page is the link.
with (ROOT / "pyproject.toml").open("rb") as _pyproject:
    REPOSITORY = tomllib.load(_pyproject)["project"]["urls"]["Repository"]
rst_epilog = f"""
.. |repository| replace:: {REPOSITORY}
.. _repository: {REPOSITORY}
"""

#: The STOMP specifications, one page per version; ``:spec:`1.2 §ERROR``` links a
#: section (spec_anchor() gives its anchor on the page).
SPEC_URL = "https://stomp.github.io/stomp-specification-{version}.html"

# Furo: maintained, readable on a phone, light and dark.  Installed by the dev and
# docs extras.
html_theme = "furo"
html_title = f"stomp-proto {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]


def _public_bases(app: object, name: str, obj: object, options: object, bases: list[type]) -> None:
    """Show a private base class (``_TransactionEvent``) as its first public ancestor."""
    for index, base in enumerate(bases):
        while base.__name__.startswith("_") and base.__bases__:
            base = base.__bases__[0]
        bases[index] = base


#: Classes users get from a factory (``connect()``, ``BrokerCore.open_session``), or
#: that Spark makes (with its options): the constructor's parameters are internals,
#: or pyspark's (``*args, **kwargs`` when pyspark is a stand-in), left out of the page.
NOT_CONSTRUCTED_BY_USERS = {
    "stomp_proto.asyncio.AsyncClient",
    "stomp_proto.asyncio.AsyncSubscription",
    "stomp_proto.threads.Client",
    "stomp_proto.threads.Subscription",
    "stomp_proto.broker.Session",
    "stomp_proto.spark.StompDataSource",
    "stomp_proto.spark.StompStreamsDataSource",
    "stomp_proto.spark.StompCaptureDataSource",
}


def _public_typehints(
    app: Any, what: str, name: str, obj: object, options: object, args: str, retann: str
) -> None:
    """Correct the type hints autodoc recorded for the description.

    A factory-made class loses its constructor's parameters; a ``@contextmanager``
    or ``@asynccontextmanager`` function returns a context manager, not the
    ``Iterator`` / ``AsyncIterator`` its generator is annotated with.
    """
    wrapped = getattr(obj, "__wrapped__", None)
    if inspect.isasyncgenfunction(wrapped):
        manager = "contextlib.AbstractAsyncContextManager"
    elif inspect.isgeneratorfunction(wrapped):
        manager = "contextlib.AbstractContextManager"
    elif name in NOT_CONSTRUCTED_BY_USERS:
        manager = ""
    else:
        return
    document = getattr(app.env, "current_document", None)  # Sphinx 8.2 and later
    recorded = getattr(document, "autodoc_annotations", None)
    if recorded is None:
        recorded = app.env.temp_data.get("annotations", {})
    if not manager:
        recorded.pop(name, None)
        return
    hints = recorded.get(name, {})
    returned = hints.get("return", "")
    if "[" in returned:
        hints["return"] = manager + returned[returned.index("[") :]


def spec_anchor(version: str, words: list[str]) -> str:
    """The anchor of a section of a specification page.

    1.1 and 1.2 name sections by their titles, spaces as underscores
    (``Value_Encoding``); 1.0 names its frames ``frame-SEND`` and its grammar
    ``augmented-bnf``, and opens with the connecting part.
    """
    if version != "1.0":
        return "_".join(words)
    if words == ["Connecting"]:
        return ""
    if len(words) == 1 and words[0].isupper():
        return "frame-" + words[0]
    return "-".join(words).lower()


def spec_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: object,
    options: dict[str, Any] | None = None,
    content: list[str] | None = None,
) -> tuple[list[nodes.Node], list[nodes.system_message]]:
    """``:spec:`1.2 §Heart-beating``` -> a link to that section of the 1.2 specification.

    ``:spec:`1.2``` links the whole page; ``:spec:`the text <1.1 §NACK>``` shows
    other text.
    """
    _, title, target = split_explicit_title(text)
    version, _, section = target.partition("§")
    url = SPEC_URL.format(version=version.strip())
    anchor = spec_anchor(version.strip(), section.split())
    if anchor:
        url += "#" + anchor
    return [nodes.reference(rawtext, title, refuri=url, **(options or {}))], []


def _no_builtin_docstring(
    app: object, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """Leave out a constant's docstring when it is its type's (``str``, ``float``,
    ``tuple`` ...): ``DRAIN_TIMEOUT`` is not "Convert a string or number to a
    floating point number".  The directive's own text describes it."""
    if what not in ("data", "attribute") or not lines:
        return
    # An alias such as ``tuple[tuple[str, str], ...]`` passes on its origin's docstring.
    for source in (type(obj), getattr(obj, "__origin__", None)):
        borrowed = getattr(source, "__doc__", None)
        if isinstance(borrowed, str) and inspect.cleandoc(borrowed).splitlines()[0] == lines[0]:
            lines.clear()
            return


def setup(app: Any) -> None:
    app.add_role("spec", spec_role)
    app.connect("autodoc-process-docstring", _no_builtin_docstring)
    app.connect("autodoc-process-bases", _public_bases)
    # After autodoc's own handler, which records the hints (Sphinx before 9).
    app.connect("autodoc-process-signature", _public_typehints, priority=600)
