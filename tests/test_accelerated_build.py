"""scripts/build_accelerated.py builds a core that behaves exactly like the pure-Python one.

The accelerated build (the Cython twins ``stomp_proto/_*_native.pyx``, some seconds
to compile) is the accelerated wheel that ``scripts/test.sh`` built for this Python
(``STOMP_PROTO_ACCELERATED_WHEEL``), or one built here from the pure wheel it names in
``STOMP_PROTO_WHEEL`` (``build_accelerated.py --wheel``), installed with pip, or else
goes into a temporary copy of the package (``--target``); then the same scripts run under
both builds, each in a subprocess, and the outputs must be identical: a codec probe
(below), tests/build_probe.py, which replays the fuzz corpora and regressions and a few
hundred recorded sessions through the decoder and both connections (events, errors
with their messages, bytes sent), and the same probe's ``--splits``, which feeds the
short corpus inputs in every two-chunk split and byte by byte.  The pure side runs
with ``STOMP_PROTO_NO_EXTENSIONS=1``, so it is pure even where an extension module
was built in place.  Skipped where Cython, setuptools or a C compiler is missing -
except under ``CI=true``, where that fails.  (scripts/test.sh also runs the core,
client and broker tests on the accelerated wheel, in .venv-accelerated.)
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

from stomp_proto._build import NATIVE_MODULES

ROOT = Path(__file__).resolve().parent.parent

if os.environ.get("CI") != "true":
    # In CI the accelerated build is part of the release: a missing tool fails the run.
    pytest.importorskip("Cython")
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
    # What the native scanner must judge as the pure code does (each a small frame).
    b"MESSAGE\ndestination:/q\ncontent-length:007\ncontent-length:x\n\nabcdefg\x00",
    b"MESSAGE\ncontent-length:99999999999999999999999\n\n\x00",
    b"MESSAGE\ncontent-length: 3\n\nabc\x00",
    b"MESSAGE\ncontent-length:\n\n\x00",
    b"MESSAGE\ncontent-length:3\n\nabcd\x00",
    b"MESSAGE\na\\cb:c\\\\\\n\\r:d\n\n\x00",
    b"MESSAGE\na:b\\\n\n\x00",
    b"MESSAGE\na:b\\x\n\n\x00",
    b"MESSAGE\n:empty\n\n\x00",
    b"MESSAGE\nnocolon\n\n\x00",
    b"MESSAGE\na:\xff\xfe\n\n\x00",
    b"MESSAGE\na:b\rc\nd:e\r\n\r\n\x00",
    b"MESSAGE\r\na:b\r\r\n\r\n\x00",
    b"MESSAGE\na:b\n\r\nbody\x00\r\n\r",
    b"CONNECTED\nversion:1.2\nx:a\\cb\n\n\x00",
    b"STOMP\nhost:a\\cb\naccept-version:1.2\n\n\x00",
    b"NACK\nid:1\n\n\x00RECEIPT\nreceipt-id:7\n\n\x00",
    b"SUBSCRIBE\nid:1\n\nbody\x00",
    b"RECEIPT\nreceipt-id:1\n\nx\x00",
    b"MESSAGE\n" + b"h:v\n" * 30 + b"\n\x00",
    b"MESSAGE\n" + b"x" * 70 + b":v\n\n\x00",
    b"MESSAGE\nk:\x00\n\n\x00",
    b"\r\r\nMESSAGE\n\n\x00",
    # Lenient text: blank lines of blanks, blanks around content-length, CR in values.
    b"SEND\ndestination:/q\ncontent-length: 2 \r\n \t\r\nab\x00",
    b"SEND\ndestination:/q\n  \nab\x00",
    b" \nSEND\ndestination:/q\n\n\x00",
    b"send\ndestination:/q\n\n\x00",
    b"SEND\nd:a\rb\r\n\r\nbody\x00",
    b"SEND\nd:a\\tb\n\n\x00",
    b"NACK\nid:1\n\nbody\x00",
]
for version in ("1.0", "1.1", "1.2"):
    for strict in (True, False, "verbatim"):
        for stream in streams:
            for size in (7, 1460, 1 << 20):
                limits = Limits(max_line_length=60)
                decoder = FrameDecoder(version, strict=strict is True, limits=limits)
                if strict == "verbatim":
                    decoder._keep_text()  # the lenient server's decoder
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
# Small streams in every two-chunk split: the native scanner hands partial frames
# to the pure code at every offset.
for version, verbatim in (("1.0", False), ("1.1", False), ("1.2", False), ("1.2", True)):
    for stream in streams[6:]:
        for cut in range(len(stream) + 1):
            limits = Limits(max_line_length=60, max_headers=20)
            decoder = FrameDecoder(version, strict=not verbatim, limits=limits)
            if verbatim:
                decoder._keep_text()
            out = []
            try:
                for chunk in (stream[:cut], stream[cut:], None):
                    decoder.receive_data(chunk)
                    out.extend(decoder)
            except RemoteProtocolError as exc:
                out.append((exc.kind, exc.limit, exc.message))
            print(version, cut, repr(out)[:600])
frames = [
    Frame("SEND", (("destination", "/q"), ("a:b", "c\nd\\e\rf"), ("g", "\x01")), b"xyz"),
    Frame("SEND", (("content-length", "9"), ("a", "")), b"\x00"),
    Frame("CONNECT", (("login", "a:b"), ("host", "h")), b""),
    Frame("SEND", (("", "x"),), b""),
    Frame("SEND", (("a", "b\x00"),), b""),
    Frame("ACK", (("id", "1"),), b"body"),
    Frame("ACK", (("id", "a:b\\c\rd\ne"), ("x-content-length", "1")), b""),
    Frame("NACK", (("id", "1"), ("content-length", "5")), b""),
    Frame("SEND", (("destination", "/q/\u00e9"), ("k", "\ud800")), b"x"),
    Frame("SEND", (("destination", "/q"),), b"a\x00b"),
    Frame("CONNECTED", (("version", "1.2"), ("server", "a\rb")), b""),
    Frame("CONNECT", (("host", "a\\b"),), b""),
    Frame("STOMP", (("host", "a:b"),), b""),
    Frame("MESSAGE", (("destination", "/q"), ("a", "b\rc")), b""),
    Frame("BOGUS", (), b""),
    Frame("SEND", ((1, "x"),), b""),
]
for version in ("1.0", "1.1", "1.2"):
    encoder = FrameEncoder(version)
    for frame in frames:
        for content_length in (True, False):
            try:
                print(version, encoder.encode(frame, content_length=content_length))
            except stomp_proto.LocalProtocolError as exc:
                print(version, exc.kind, exc.message)
            except TypeError as exc:
                print(version, "TypeError", exc)
"""

# The events a client and a server read, and what users do with them: they must be
# the public classes, equal to the pure build's, frozen, picklable and subclassable.
EVENTS = r"""
import dataclasses, pickle
import stomp_proto
from stomp_proto import ClientConnection, Connect, Message, Send, ServerConnection, Subscribe

print(stomp_proto.BUILD)
conn = ClientConnection()
conn.send(Connect(host="/"))
conn.receive_data(b"CONNECTED\nversion:1.2\nheart-beat:0,0\nserver:x\n\n\x00")
events = [conn.next_event()]
conn.send(Subscribe("/q", id="0", ack="client-individual"))
conn.send(Subscribe("/r", id="1", ack="client"))
conn.receive_data(
    b"MESSAGE\ndestination:/q\nmessage-id:1\nsubscription:0\nack:a1\nx:y\n"
    b"content-length:2\n\nhi\x00\n"
    b"MESSAGE\ndestination:/r\nmessage-id:2\nsubscription:1\nack:a2\n\nyo\x00"
    b"MESSAGE\ndestination:/t\nmessage-id:3\nsubscription:9\n\n\x00"
)
try:
    for event in conn:
        events.append(event)
except stomp_proto.RemoteProtocolError as exc:
    print("raised", exc.kind, exc.message)
for event in events:
    if type(event) is stomp_proto.HeartBeat:
        continue
    copy = pickle.loads(pickle.dumps(event))
    print(type(event).__module__, type(event).__qualname__, repr(event), copy == event)
    try:
        event.headers = ()
    except dataclasses.FrozenInstanceError:
        print("frozen")
    print(repr(dataclasses.replace(event)), hash(pickle.dumps(event)) == hash(pickle.dumps(copy)))
message, other, _ = [event for event in events if isinstance(event, Message)]
print(conn.pending_acks("0"), conn.pending_acks("1"))
for settle, event in ((conn.ack, message), (conn.ack, message), (conn.nack, other),
                      (conn.ack, other), (conn.ack, dataclasses.replace(message))):
    try:
        print(settle(event), conn.pending_acks("0"), conn.pending_acks("1"), conn.state)
    except stomp_proto.LocalProtocolError as exc:
        print("raised", exc.kind, exc.message)
conn.receive_data(b"RECEIPT\nreceipt-id:none\n\n\x00")
try:
    conn.next_event()
except stomp_proto.RemoteProtocolError as exc:
    print("raised", exc.kind, exc.message, conn.state)

# What a client sends: SEND frames of every shape, in each version, and the refusals.
for version in ("1.0", "1.1", "1.2"):
    sender = ClientConnection()
    sender.send(Connect(host="/", accept_versions=(version,)))
    sender.receive_data(b"CONNECTED\nversion:%s\n\n\x00" % version.encode())
    sender.next_event()
    sender.send(stomp_proto.Begin("t1"))
    for send in (
        Send("/q", body=b"hi", headers={"a:b": "c\\d\re\nf"}, content_type="text/plain"),
        Send("/q", body="\u00e9", transaction="t1"),
        Send("/q", transaction="t2"),
        Send("/q", receipt="r1"),
        Send("/q", receipt="r1"),
        Send("/q", body=b"a\x00b", content_length=False),
        Send("/q", body=b"a", headers=(("content-length", "9"), ("x", "\ud800"))),
        Send("/q\n", headers=(("", "empty"),)),
        Send("/q", content_length=1),
        Send("/q", transaction=["t1"]),
        Send("/q", content_type=5),
    ):
        try:
            print(version, sender.send(send), sender.state, sender.pending_receipts)
        except stomp_proto.LocalProtocolError as exc:
            print(version, "raised", exc.kind, exc.message)
        except TypeError as exc:
            print(version, "raised TypeError", exc)

class Mine(Message):
    pass

print(Mine.from_frame(stomp_proto.Frame("MESSAGE", (("destination", "/q"), ("message-id", "1"),
    ("subscription", "0")), b""), "1.2"))
server = ServerConnection()
server.receive_data(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
print(repr(server.next_event()))
print(server.send(stomp_proto.Connected()))
server.receive_data(
    b"SEND\ndestination:/q\nreceipt:r1\ncontent-length:1\n\nx\x00"
    b"SUBSCRIBE\nid:0\ndestination:/q\nack:client\n\n\x00"
    b"SEND\ndestination:\n\n\x00"
)
try:
    for event in server:
        print(repr(event))
except stomp_proto.RemoteProtocolError as exc:
    print("raised", exc.kind, exc.message, repr(exc.event_hint))
"""


def load_build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_accelerated", ROOT / "scripts/build_accelerated.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe(path: Path, *command: str, pure: bool = False) -> list[str]:
    """The output of ``python COMMAND`` (default: the codec probe) with ``path`` first on
    sys.path, so that its stomp_proto is the one imported; ``pure`` keeps it pure."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    env.pop("STOMP_PROTO_NO_EXTENSIONS", None)
    if pure:
        env["STOMP_PROTO_NO_EXTENSIONS"] = "1"
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
def accelerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the accelerated package: the accelerated wheel installed there
    by pip when scripts/test.sh names the built wheel, else a built copy of the sources."""
    build_accelerated = load_build_script()
    target = tmp_path_factory.mktemp("accelerated")
    if "STOMP_PROTO_WHEEL" not in os.environ:
        files = build_accelerated.build(build_accelerated.copy_package(target))
        assert sorted(f.name.split(".")[0] for f in files) == sorted(NATIVE_MODULES)
        return target
    built = os.environ.get("STOMP_PROTO_ACCELERATED_WHEEL")
    if built:
        # scripts/test.sh built it from that pure wheel with this Python (and checked it
        # with twine): building it again would take most of a minute.
        wheel = Path(built)
    else:
        pure = Path(os.environ["STOMP_PROTO_WHEEL"])
        wheel = build_accelerated.accelerate_wheel(pure, tmp_path_factory.mktemp("wheel"))
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


def same_output(accelerated: Path, *command: str) -> list[str]:
    """Run ``command`` under both builds; assert identical output after the build line."""
    fast = probe(accelerated, *command)
    pure = probe(pure_root(), *command, pure=True)
    assert fast[0] == "accelerated"
    assert pure[0] == "pure"
    assert len(fast) == len(pure)
    for got, want in zip(fast[1:], pure[1:], strict=True):
        assert got == want
    return pure


@pytest.mark.timeout(600)
def test_accelerated_codec_matches_pure_python(accelerated: Path) -> None:
    lines = same_output(accelerated)
    assert len(lines) > 1000


def test_accelerated_events_are_the_public_classes_and_behave_alike(accelerated: Path) -> None:
    lines = same_output(accelerated, "-c", EVENTS)
    assert "stomp_proto._events Message" in "\n".join(lines)
    assert lines.count("frozen") >= 4


@pytest.mark.timeout(600)
def test_accelerated_core_replays_the_fuzz_corpora_and_sessions_as_pure_python(
    accelerated: Path,
) -> None:
    pure = same_output(accelerated, str(ROOT / "tests" / "build_probe.py"), "300")
    corpus = [line for line in pure if line.startswith(("corpus/", "regressions/"))]
    # Every corpus target is there (a renamed directory would shrink the comparison).
    targets = {line.split("/")[1] for line in corpus}
    assert targets == {
        "decoder",
        "server",
        "client",
        "stream",
        "server_session",
        "client_session",
        "differential",
        "unbounded",
    }
    assert len(corpus) > 500
    assert sum("raised RemoteProtocolError" in line for line in pure) > 100


@pytest.mark.timeout(600)
def test_accelerated_core_gives_the_same_results_in_every_split(accelerated: Path) -> None:
    pure = same_output(accelerated, str(ROOT / "tests" / "build_probe.py"), "--splits")
    feedings = sum(int(line.split()[1]) for line in pure[1:])
    assert len(pure) > 200
    assert feedings > 10_000


def test_the_extension_module_is_the_one_imported(accelerated: Path) -> None:
    script = (
        "import importlib, stomp_proto\n"
        f"for name in {NATIVE_MODULES!r}:\n"
        "    print(importlib.import_module('stomp_proto.' + name).__file__)\n"
    )
    paths = probe(accelerated, "-c", script)
    assert len(paths) == len(NATIVE_MODULES)
    for path in paths:
        assert Path(path).parent == accelerated / "stomp_proto"
        assert Path(path).name.endswith(sysconfig.get_config_var("EXT_SUFFIX"))


@pytest.mark.skipif(
    "STOMP_PROTO_WHEEL" not in os.environ,
    reason="scripts/test.sh names the built pure wheel in STOMP_PROTO_WHEEL",
)
def test_accelerated_wheel_differs_from_the_pure_one_only_by_the_extension(
    accelerated: Path,
) -> None:
    with zipfile.ZipFile(os.environ["STOMP_PROTO_WHEEL"]) as pure:
        pure_files = {n for n in pure.namelist() if not n.endswith((".dist-info/RECORD", "/WHEEL"))}
    installed = {
        path.relative_to(accelerated).as_posix()
        for path in accelerated.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    extensions = {name for name in installed - pure_files if name.endswith(".so")}
    assert {name.split("/")[-1].split(".")[0] for name in extensions} == set(NATIVE_MODULES)
    # Every file of the pure wheel is there (pip adds INSTALLER and the like).
    assert pure_files <= installed
    tag = load_build_script().wheel_tag()
    wheel_file = next(accelerated.glob("*.dist-info")) / "WHEEL"
    assert f"Tag: {tag}" in wheel_file.read_text().splitlines()


def test_clean_removes_only_built_modules(tmp_path: Path) -> None:
    build_accelerated = load_build_script()
    package = tmp_path / "stomp_proto"
    (package / "_client").mkdir(parents=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    names = [f"_decoder_native{suffix}", "_events_native.cpython-312-x86_64-linux-gnu.so"]
    # Sources, and extension modules that are no part of the build.
    kept = ["_decoder_native.pyx", "_native_shared.pxd", "_decoder.py", f"_websocket{suffix}"]
    for name in names + kept:
        (package / name).write_bytes(b"")
    removed = build_accelerated.clean(tmp_path)
    removed_names = [os.path.relpath(p, package).replace(os.sep, "/") for p in removed]
    assert sorted(removed_names) == sorted(names)
    left = [p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file()]
    assert sorted(left) == sorted(kept)


@pytest.mark.timeout(600)
def test_the_native_build_prints_no_warning(tmp_path: Path) -> None:
    # Cython's and the C compiler's output, as --verbose shows it: a warning is a
    # cause to fix in the .pyx or .pxd (22 of them once: helpers unused in some twins,
    # variables the compiler could not see set).
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/build_accelerated.py"), "--target", str(tmp_path),
         "--verbose"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    warnings = [line for line in output.splitlines() if "warning" in line.lower()]
    assert warnings == []
    assert "-O2" in output  # (the compile commands were shown: the flag build_accelerated adds)
