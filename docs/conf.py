"""Sphinx configuration for the stomp-proto documentation."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

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

html_theme = "alabaster"
html_static_path: list[str] = []
html_theme_options = {
    "description": "Sans-IO STOMP 1.0/1.1/1.2 for Python",
}
