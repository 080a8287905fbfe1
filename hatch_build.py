"""Hatchling build hook: the accelerated wheel, when ``STOMP_PROTO_ACCELERATE=1`` asks for it.

    STOMP_PROTO_ACCELERATE=1 python -m build --wheel     # cp3XX-...-<platform> wheel

By default the hook does nothing and the wheel is the pure ``py3-none-any`` one.  With
``STOMP_PROTO_ACCELERATE=1`` it asks for Cython and setuptools in the build
environment, builds the native fast path (``stomp_proto/_speedups.pyx``, by
``scripts/build_accelerated.py``, on a copy of the package), adds the extension module
to the wheel beside the ``.py`` sources, and tags the wheel for the interpreter and
platform that built it.  cibuildwheel uses this route (``[tool.cibuildwheel]`` in
pyproject.toml); see docs/development.rst.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: What builds the native code: Cython writes the C (pinned to a major version: its
#: output is part of the release), setuptools drives the C compiler.
ACCELERATE_REQUIRES = ["cython>=3.0,<4", "setuptools>=65"]


def accelerate_requested() -> bool:
    return os.environ.get("STOMP_PROTO_ACCELERATE", "") == "1"


def _load_build_script(root: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "stomp_proto_build_accelerated", Path(root, "scripts", "build_accelerated.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class AcceleratedBuildHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def _active(self) -> bool:
        return self.target_name == "wheel" and accelerate_requested()

    def dependencies(self) -> list[str]:
        return list(ACCELERATE_REQUIRES) if self._active() else []

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if not self._active() or version == "editable":
            return
        build_accelerated = _load_build_script(self.root)
        self._work = Path(tempfile.mkdtemp(prefix="stomp-proto-hatch-"))
        files = build_accelerated.build(build_accelerated.copy_package(self._work), quiet=False)
        for path in files:
            build_data["force_include"][str(path)] = path.relative_to(self._work).as_posix()
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        work = getattr(self, "_work", None)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
