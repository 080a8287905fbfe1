"""The programs shown on the per-framework docs pages run against the embedded broker."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import shutil
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio

from stomp_proto.broker import Broker

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXPECTED = [b"message 0", b"message 1", b"message 2", b"in a transaction", b"delivered on COMMIT"]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_with_broker(program: str) -> list[bytes]:
    async def scenario() -> list[bytes]:
        async with Broker("127.0.0.1", 0) as broker:
            module = load(program)
            async with asyncio.timeout(30):
                if program == "asyncio_example":
                    result: list[bytes] = await module.main(broker.port)
                elif program == "trio_example":
                    result = await asyncio.to_thread(trio.run, module.main, broker.port)
                else:
                    result = await asyncio.to_thread(module.main, broker.port)
            return result

    return asyncio.run(scenario())


@pytest.mark.parametrize("program", ["asyncio_example", "trio_example", "threads_example"])
def test_framework_example_runs(program: str) -> None:
    assert run_with_broker(program) == EXPECTED


# -- the programs the install, examples, errors and TLS pages print ---------------------
#
# Each runs as printed, in a subprocess, as a reader would run it; the only change is the
# broker's port (61613 on the page, a free port here), so that a broker already on 61613
# - RabbitMQ in CI - is left alone.  A test fails when a program's output changes.

README = EXAMPLES.parent / "README.rst"


def run_program(name: str, port: int | None = None, cwd: Path | None = None) -> str:
    source = (EXAMPLES / name).read_text(encoding="utf-8")
    if port is not None:
        assert "61613" in source, f"{name} names no port to replace"
        source = source.replace("61613", str(port))
    result = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def run_against_broker(name: str, cwd: Path | None = None, **options: Any) -> str:
    async def scenario() -> str:
        async with Broker("127.0.0.1", 0, **options) as broker:
            return await asyncio.to_thread(run_program, name, broker.port, cwd)

    return asyncio.run(scenario())


def test_the_readme_examples_are_the_example_files() -> None:
    """The README's three programs are examples/first_client.py, sans_io_session.py and
    codec_only.py, which the site includes and the tests below run."""
    readme = README.read_text(encoding="utf-8")
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", readme)
    assert len(blocks) == 3
    for block, name in zip(
        blocks, ["first_client.py", "sans_io_session.py", "codec_only.py"], strict=True
    ):
        program = textwrap.dedent(block).strip()
        assert program == (EXAMPLES / name).read_text(encoding="utf-8").strip(), name


def test_first_client_prints_the_message() -> None:
    assert run_against_broker("first_client.py") == "b'hello'\n"


def test_sans_io_session_prints_bytes_and_events() -> None:
    assert run_program("sans_io_session.py").splitlines() == [
        r"b'CONNECT\naccept-version:1.0,1.1,1.2\nhost:/\nheart-beat:10000,10000\n\n\x00'",
        "Connected(version='1.2', heartbeat=(10000, 10000), session=None, server=None, headers=())",
        r"b'SEND\ndestination:/queue/a\ncontent-length:2\n\nhi\x00'",
        "0.0",
    ]


def test_codec_only_prints_the_frame() -> None:
    assert run_program("codec_only.py") == "MESSAGE /queue/a b'hello'\n"


def test_errors_and_reconnect_shows_each_error() -> None:
    lines = run_program("errors_and_reconnect.py").splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "ConnectionLost",
        "BrokerError",
        "LocalProtocolError",
        "received",
    ]
    assert lines[1] == "BrokerError: Bad CONNECT: login failed"
    assert lines[3] == "received: sent after the restart"


def test_tls_client_talks_to_a_tls_broker(tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl command to make the certificate with")
    # The command docs/tls.rst prints.
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-days", "30",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        cwd=tmp_path, check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    assert run_against_broker("tls_client.py", cwd=tmp_path, ssl=context) == "b'over TLS'\n"


def test_heartbeat_client_agrees_on_one_second_beats() -> None:
    output = run_against_broker("heartbeat_client.py", heartbeat=(1000, 1000))
    assert output == "agreed: (1000, 1000)\nstill connected\n"


def test_codec_listener_prints_the_waiting_message() -> None:
    async def scenario() -> str:
        async with Broker("127.0.0.1", 0) as broker:
            # What the page says to run first, to leave a message waiting.
            send = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "stomp_proto", "send", "--port", str(broker.port),
                "/queue/work", "hello",
            )  # fmt: skip
            assert await send.wait() == 0
            return await asyncio.to_thread(run_program, "codec_listener.py", broker.port)

    assert asyncio.run(scenario()) == "b'hello'\n"
