"""Hatchling build hook: every wheel holds the native fast path when it can be built.

    pip install .                                     # accelerated where a compiler is
    STOMP_PROTO_ACCELERATE=1 python -m build --wheel  # accelerated, or the build fails
    STOMP_PROTO_NO_EXTENSIONS=1 python -m build       # the pure py3-none-any wheel

On a wheel build (``pip install .``, an install from the sdist, ``python -m build``)
the hook asks for Cython and setuptools in the build environment, builds the native
fast path (the twins ``stomp_proto/_*_native.pyx``, by ``scripts/build_accelerated.py``, on a
copy of the package), adds the extension modules to the wheel beside the ``.py``
sources, and tags the wheel for the interpreter and platform that built it.

Where that cannot be done (no C compiler, no Python headers, no Cython) the wheel is
the pure ``py3-none-any`` one, as msgpack and PyYAML fall back to their pure code: one
line on stderr says why and how to get the fast build, and the same words go into the
wheel (``.dist-info/extra_metadata/native-build.txt``), where ``python -m stomp_proto
--version`` finds them, since pip shows a build's output only with ``-v``.
``STOMP_PROTO_ACCELERATE=1`` (cibuildwheel, scripts/build_wheels.sh) turns the fallback
into an error; ``STOMP_PROTO_NO_EXTENSIONS`` (any non-empty value) skips the build.

An editable install (``pip install -e .``) stays pure: a module compiled into the
checkout would go stale as the ``.py`` and ``.pyx`` files it mirrors are edited.
``python scripts/build_accelerated.py --inplace`` builds it there on purpose.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: What builds the native code: Cython writes the C (pinned to a major version: its
#: output is part of the release), setuptools drives the C compiler.
ACCELERATE_REQUIRES = ["cython>=3.0,<4", "setuptools>=65"]

#: Where the wheel records why it is pure (under its .dist-info/extra_metadata/).
NOTE_NAME = "native-build.txt"


def _flag(name: str) -> str:
    return os.environ.get(name, "")


def _say(line: str) -> None:
    print(f"stomp-proto: {line}", file=sys.stderr, flush=True)


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

    def _wanted(self) -> bool:
        return self.target_name == "wheel" and not _flag("STOMP_PROTO_NO_EXTENSIONS")

    def dependencies(self) -> list[str]:
        # Asked for editable installs too (hatchling does not say which); unused there.
        return list(ACCELERATE_REQUIRES) if self._wanted() else []

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        if not self._wanted():
            _say("STOMP_PROTO_NO_EXTENSIONS is set: pure-Python build")
            return
        if version == "editable":
            _say(
                "editable install: pure-Python build; for the native fast path run "
                "`python scripts/build_accelerated.py --inplace` (again after each edit)"
            )
            return
        required = _flag("STOMP_PROTO_ACCELERATE") == "1"
        self._work = Path(tempfile.mkdtemp(prefix="stomp-proto-hatch-"))
        build_accelerated = _load_build_script(self.root)
        problem = build_accelerated.toolchain_problem()
        files: list[Path] = []
        if problem is None:
            try:
                # The compiler's output goes to the build's stderr (pip shows it with -v).
                package = build_accelerated.copy_package(self._work)
                files = build_accelerated.build(package, quiet=False)
            except build_accelerated.NativeBuildError:
                if required:
                    raise
                problem = build_accelerated.ToolchainProblem(
                    "the C build failed; `pip install -v` shows why",
                    build_accelerated.COMPILER_REMEDY,
                )
        if problem is not None:
            if required:
                raise RuntimeError(f"STOMP_PROTO_ACCELERATE=1 but {problem.missing}")
            self._fall_back(problem.missing, problem.remedy, build_data)
            return
        for path in files:
            build_data["force_include"][str(path)] = path.relative_to(self._work).as_posix()
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def _fall_back(self, missing: str, remedy: str, build_data: dict[str, Any]) -> None:
        """Keep the pure wheel; say why, on stderr and in the wheel's metadata."""
        line = (
            f"native fast path not built ({missing}): pure-Python build; "
            f"for the fast build {remedy} and reinstall"
        )
        _say(line)
        note = self._work / NOTE_NAME
        note.write_text(line + "\n", encoding="utf-8")
        build_data["extra_metadata"][str(note)] = NOTE_NAME

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        work = getattr(self, "_work", None)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
