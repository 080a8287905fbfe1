"""Where ``stomp_proto`` comes from, and what the built distributions hold.

Imported by name (pytest puts ``tests/`` on ``sys.path``) from ``conftest.py``, which
stops a run that should test the installed wheel but imports the checkout, and from
``test_packaging.py``.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import stomp_proto

ROOT = Path(__file__).resolve().parent.parent


def site_packages() -> set[Path]:
    """This interpreter's own site-packages directories (the venv's, in a venv)."""
    return {Path(sysconfig.get_path(name)).resolve() for name in ("purelib", "platlib")}


def installed_location_problem() -> str | None:
    """Why ``stomp_proto`` is not the copy installed in site-packages, or None."""
    package = Path(stomp_proto.__file__).resolve().parent
    places = site_packages()
    if not any(package.is_relative_to(place) for place in places):
        return f"stomp_proto was imported from {package}, outside {sorted(map(str, places))}"
    return None


def package_files(package: Path) -> set[str]:
    """The package's files, relative to it: sources and data, without byte code or builds."""
    return {
        path.relative_to(package).as_posix()
        for path in package.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix not in {".pyc", ".so", ".pyd"}
    }
