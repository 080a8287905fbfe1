"""scripts/build_mypyc.py builds a core that behaves exactly like the pure-Python one.

The build is compiled (about 40 s) into the wheel that ``scripts/test.sh`` built (named
in ``STOMP_PROTO_WHEEL``; ``build_mypyc.py --wheel``), installed with pip, or else into a
temporary copy of the package (``--target``); then the same scripts run under both
builds, each in a subprocess, and the outputs must be identical: a codec probe (below),
and tests/build_probe.py, which replays the fuzz corpora and regressions and a few
hundred recorded sessions through the decoder and both connections (events, errors
with their messages, bytes sent).  Skipped where mypyc, setuptools or a C compiler is
missing - except under ``CI=true``, where that fails.  (scripts/test.sh also runs the
core, client and broker tests on the compiled wheel, in .venv-compiled.)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

if os.environ.get("CI") != "true":
    # In CI the compiled build is part of the release: a missing tool fails the run.
    pytest.importorskip("mypyc")
    pytest.importorskip("setuptools")
    if not shutil.which(sysconfig.get_config_var("CC").split()[0] or "cc"):
        pytest.skip("no C compiler", allow_module_level=True)

# Decodes a varied stream under several chunkings and versions, and encodes frames that
# take each encoder route; prints everything, errors included, one line per result.
PROBE = r"""
import sys
import stomp_proto
from stomp_proto import Frame, FrameDecoder, FrameEncoder, Limits, RemoteProtocolError

print(stomp_proto.BUILD)
big = bytes(range(256)) * 300
streams = [
    b"\n\r\nCONNECTED\r\nversion:1.2\r\n\r\n\x00\n"
    b"MESSAGE\ndestination:/q/\xc3\xa9\nfoo:a\\cb\\nc\\\\d\\re\ncontent-length:3\n\na\x00b\x00\n"
    b"MESSAGE\nx:\x01\\\\\x01\ny:1:2\n\nno length\x00"
    b"MESSAGE\ncontent-length:%d\n\n%s\x00\r\n" % (len(big), big)
    + b"ERROR\nmessage:boom\n\nbody\x00",
    b"SEND\na:\\t\n\n\x00",
    b"SEND\na\nb:1:2\n\n\x00",
    b"ACK\nid:1\n\nx\x00",
    b"SEND\ncontent-length:2\n\nabc\x00",
    b"FOO\n\n\x00",
    b"SEND\ncontent-length:%d\n\n" % len(big) + big[:1000],
]
for version in ("1.0", "1.1", "1.2"):
    for strict in (True, False):
        for stream in streams:
            for size in (7, 1460, 1 << 20):
                decoder = FrameDecoder(version, strict=strict, limits=Limits(max_line_length=60))
                out = []
                try:
                    for i in range(0, len(stream), size):
                        decoder.receive_data(stream[i : i + size])
                        out.extend(decoder)
                    decoder.receive_data(None)
                    out.extend(decoder)
                except RemoteProtocolError as exc:
                    out.append(exc.kind)
                print(version, strict, size, repr(out)[:2000], len(repr(out)))
frames = [
    Frame("SEND", (("destination", "/q"), ("a:b", "c\nd\\e\rf"), ("g", "\x01")), b"xyz"),
    Frame("SEND", (("content-length", "9"), ("a", "")), b"\x00"),
    Frame("CONNECT", (("login", "a:b"), ("host", "h")), b""),
    Frame("SEND", (("", "x"),), b""),
    Frame("SEND", (("a", "b\x00"),), b""),
    Frame("ACK", (("id", "1"),), b"body"),
]
for version in ("1.0", "1.1", "1.2"):
    encoder = FrameEncoder(version)
    for frame in frames:
        try:
            print(version, encoder.encode(frame))
        except stomp_proto.LocalProtocolError as exc:
            print(version, exc.kind)
"""


def load_build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_mypyc", ROOT / "scripts/build_mypyc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe(path: Path, *command: str) -> list[str]:
    """The output of ``python COMMAND`` (default: the codec probe) with ``path`` first on
    sys.path, so that its stomp_proto is the one imported."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    result = subprocess.run(
        [sys.executable, *(command or ("-c", PROBE))],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


def pure_root() -> Path:
    """Where the pure-Python package is: the checkout, or the installed pure wheel."""
    import stomp_proto

    return Path(stomp_proto.__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the compiled package: the compiled wheel installed there by
    pip when scripts/test.sh names the built wheel, else a compiled copy of the sources."""
    build_mypyc = load_build_script()
    target = tmp_path_factory.mktemp("compiled")
    if "STOMP_PROTO_WHEEL" not in os.environ:
        files = build_mypyc.build(build_mypyc.copy_package(target))
        assert {f.name.split(".")[0] for f in files} >= {"_decoder", "_encoder"}
        return target
    pure = Path(os.environ["STOMP_PROTO_WHEEL"])
    out = tmp_path_factory.mktemp("wheel")
    wheel = build_mypyc.compile_wheel(pure, out)
    # pip refuses a wheel whose tags do not fit this interpreter.
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"),
            *("--target", str(target), str(wheel)),
        ],
        check=True,
        timeout=300,
    )
    return target


@pytest.mark.timeout(600)
def test_compiled_codec_matches_pure_python(compiled: Path) -> None:
    compiled = probe(compiled)
    pure = probe(pure_root())
    assert compiled[0] == "compiled"
    assert pure[0] == "pure"
    assert len(compiled) == len(pure) > 100
    for got, want in zip(compiled[1:], pure[1:], strict=True):
        assert got == want


@pytest.mark.timeout(600)
def test_compiled_core_replays_the_fuzz_corpora_and_sessions_as_pure_python(
    compiled: Path,
) -> None:
    script = str(ROOT / "tests" / "build_probe.py")
    compiled_lines = probe(compiled, script, "300")
    pure = probe(pure_root(), script, "300")
    assert compiled_lines[0] == "compiled"
    assert pure[0] == "pure"
    corpus = [line for line in pure if line.startswith(("corpus/", "regressions/"))]
    # Every corpus target is there (a renamed directory would shrink the comparison).
    targets = {line.split("/")[1] for line in corpus}
    assert targets == {"decoder", "server", "client", "stream", "server_session", "client_session"}
    assert len(corpus) > 500
    assert sum("raised RemoteProtocolError" in line for line in pure) > 100
    assert len(compiled_lines) == len(pure)
    for got, want in zip(compiled_lines[1:], pure[1:], strict=True):
        assert got == want


def test_compiled_modules_name_their_own_files(compiled: Path) -> None:
    script = (
        "import sys, stomp_proto\n"
        "from stomp_proto._build import CORE_MODULES\n"
        "for name in CORE_MODULES: print(name, sys.modules[name].__file__)\n"
    )
    for line in probe(compiled, "-c", script):
        name, path = line.split(" ", 1)
        parts = name.split(".")
        assert Path(path).is_file(), line
        assert Path(path).name.split(".")[0] == parts[-1], line
        assert Path(path).parent == compiled.joinpath(*parts[:-1]), line


def test_the_build_compiles_the_modules_that_build_reports_on() -> None:
    from stomp_proto._build import CORE_MODULES

    modules = load_build_script().MODULES
    assert tuple("stomp_proto." + m.replace("/", ".") for m in modules) == CORE_MODULES


@pytest.mark.skipif(
    "STOMP_PROTO_WHEEL" not in os.environ,
    reason="scripts/test.sh names the built pure wheel in STOMP_PROTO_WHEEL",
)
def test_compiled_wheel_differs_from_the_pure_one_only_by_the_extensions(
    compiled: Path,
) -> None:
    with zipfile.ZipFile(os.environ["STOMP_PROTO_WHEEL"]) as pure:
        pure_files = {n for n in pure.namelist() if not n.endswith((".dist-info/RECORD", "/WHEEL"))}
    installed = {
        path.relative_to(compiled).as_posix()
        for path in compiled.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    extensions = {name for name in installed - pure_files if name.endswith(".so")}
    assert {name.split("/")[-1].split(".")[0] for name in extensions} >= {"_decoder", "_encoder"}
    # Every file of the pure wheel is there (pip adds INSTALLER and the like).
    assert pure_files <= installed
    tag = load_build_script().wheel_tag()
    wheel_file = next(compiled.glob("*.dist-info")) / "WHEEL"
    assert f"Tag: {tag}" in wheel_file.read_text().splitlines()


def test_clean_removes_only_built_modules(tmp_path: Path) -> None:
    build_mypyc = load_build_script()
    package = tmp_path / "stomp_proto"
    (package / "_client").mkdir(parents=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    names = [
        f"_decoder{suffix}",
        f"_decoder__mypyc{suffix}",
        f"_connection{suffix}",
        f"_client/_core{suffix}",
        f"_client/_core__mypyc{suffix}",
        f"../stomp_proto__mypyc{suffix}",
    ]
    # Sources, and extension modules that are no part of the core's build.
    kept = ["_decoder.py", f"_websocket{suffix}", "py.typed", f"_client/_async{suffix}"]
    for name in names + kept:
        (package / name).write_bytes(b"")
    removed = build_mypyc.clean(tmp_path)
    removed_names = [os.path.relpath(p, package).replace(os.sep, "/") for p in removed]
    assert sorted(removed_names) == sorted(names)
    left = [p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file()]
    assert sorted(left) == sorted(kept)
