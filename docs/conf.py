"""Sphinx configuration for the stomp-proto documentation."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path
from typing import Any

# Document the package from this checkout even when it is not installed.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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
autodoc_preserve_defaults = True

# Doctest blocks (in these pages and in docstrings pulled in by autodoc) can
# use every public name without importing it first.
doctest_global_setup = "from stomp_proto import *"

# Furo: maintained, readable on a phone, light and dark.  Installed by the dev and
# docs extras.
html_theme = "furo"
html_title = f"stomp-proto {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]


def _skip_namedtuple_field_aliases(
    app: object, what: str, name: str, obj: object, skip: bool, options: object
) -> bool | None:
    """Leave out a NamedTuple's generated "Alias for field number N" entries.

    Frame's docstring already describes its fields; the generated entries repeat the
    names with nothing to say.
    """
    if (getattr(obj, "__doc__", None) or "").startswith("Alias for field number"):
        return True
    return None


def setup(app: Any) -> None:
    app.connect("autodoc-skip-member", _skip_namedtuple_field_aliases)
