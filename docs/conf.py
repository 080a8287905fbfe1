"""Sphinx configuration for the stomp-proto documentation."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

# Document the package from this checkout even when it is not installed.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The public classes defined in private modules say ``stomp_proto.ConnectionLost``
# at run time (stomp_proto/_public.py).  Autodoc finds the ``#:`` comments of
# attributes, and viewcode the source, through ``__module__``: while the site is
# built, they name the defining modules again.  The directives give the public
# names, which are the names the pages and the inventory show.
import stomp_proto.asyncio  # noqa: E402
import stomp_proto.broker  # noqa: E402
import stomp_proto.check  # noqa: E402
import stomp_proto.threads  # noqa: E402, F401
from stomp_proto._public import DEFINED_IN  # noqa: E402

for _cls, _module in DEFINED_IN.items():
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

# Doctest blocks (in these pages and in docstrings pulled in by autodoc) can
# use every public name without importing it first.
doctest_global_setup = "from stomp_proto import *"

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


def setup(app: Any) -> None:
    app.connect("autodoc-process-bases", _public_bases)
    # After autodoc's own handler, which records the hints (Sphinx before 9).
    app.connect("autodoc-process-signature", _public_typehints, priority=600)
