"""Kombu's own integration suite, taken from Kombu's sdist on PyPI at test time.

Kombu ships ``t/integration/common.py`` (the classes every transport's
integration tests subclass: BasicFunctionality, BaseExchangeTypes,
BaseTimeToLive, BasePriority, BaseMessage, BaseEventLoop, BaseFailover) in its
sdist only.  :func:`load` downloads the sdist of the Kombu that is installed
(``pip download``, once: it is kept in a cache folder), and imports that file
as a module.  Nothing of it is committed here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

__all__ = ["CLASSES", "load"]

#: The classes of Kombu's suite, each run here against every broker.
CLASSES = (
    "BasicFunctionality",
    "BaseExchangeTypes",
    "BaseTimeToLive",
    "BasePriority",
    "BaseMessage",
    "BaseEventLoop",
    "BaseFailover",
)

MEMBER = "t/integration/common.py"


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stomp-proto-kombu"


def load() -> ModuleType:
    """Kombu's ``t/integration/common.py``, for the installed Kombu's version."""
    version = importlib.metadata.version("kombu")
    folder = _cache() / f"kombu-{version}"
    source = folder / "common.py"
    if not source.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--dest",
                str(folder),
                f"kombu=={version}",
            ],
            check=True,
        )
        sdist = folder / f"kombu-{version}.tar.gz"
        with tarfile.open(sdist) as archive:
            member = archive.getmember(f"kombu-{version}/{MEMBER}")
            extracted = archive.extractfile(member)
            assert extracted is not None, f"{MEMBER} is not a file in {sdist}"
            source.write_bytes(extracted.read())
    spec = importlib.util.spec_from_file_location("kombu_integration_common", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    missing = [name for name in CLASSES if not hasattr(module, name)]
    assert not missing, f"Kombu {version}'s {MEMBER} has no {missing}"
    return module
