"""The stomp.py layer's command-line client (``stomp.__main__``) and its multicast
connection (``stomp.adapter.multicast``), as stomp.py programs and scripts use them.

The shell is driven the way stomp.py's own tests drive it: ``onecmd`` lines, with
a stdout that records what is printed; the output each command gives is stomp.py's,
which scripts that read it rely on.
"""

from __future__ import annotations

import base64
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_threads_concurrency import HOST, BrokerThread

from stomp_proto.stomppy.__main__ import StompCLI, main  # as stomp.py programs do
from stomp_proto.stomppy.adapter.multicast import MulticastConnection
from stomp_proto.stomppy.listener import TestListener

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0
USERS = {"admin": "s3cret-pass"}


class Screen:
    """A stdout that keeps each line printed, and waits for one."""

    def __init__(self) -> None:
        self.text = ""
        self._writes: list[str] = []
        self._changed = threading.Condition()

    def write(self, text: str) -> None:
        with self._changed:
            self.text += text
            self._writes.append(text)
            self._changed.notify_all()

    def flush(self) -> None:
        pass

    @property
    def lines(self) -> list[str]:
        """The lines printed, each write on its own (the prompt, written alone, left out)."""
        return [
            line
            for text in self._writes
            if text != "> "
            for line in text.removesuffix("\n").split("\n")
        ]

    def wait_for(self, wanted: Callable[[list[str]], bool], what: str) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: wanted(self.lines), WAIT):
                raise AssertionError(f"no {what} in {WAIT} s: {self.lines}")

    def count(self, line: str) -> int:
        return self.lines.count(line)


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    service = BrokerThread(users=USERS)
    try:
        yield service
    finally:
        service.close()


def shell(broker: BrokerThread, version: str = "1.2", **options: object) -> tuple[StompCLI, Screen]:
    screen = Screen()
    cli = StompCLI(HOST, broker.port, "admin", "s3cret-pass", version, stdout=screen, **options)  # type: ignore[arg-type]
    screen.wait_for(lambda lines: "CONNECTED" in lines, "CONNECTED")
    return cli, screen


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_subscribe_send_and_unsubscribe_print_what_stomp_py_prints(
    broker: BrokerThread, version: str
) -> None:
    cli, screen = shell(broker, version)
    cli.onecmd("subscribe /queue/cli")
    assert (
        "Subscribing to '/queue/cli' with acknowledge set to 'auto', id set to '1'" in screen.lines
    )
    cli.onecmd("send /queue/cli this is a test")
    screen.wait_for(lambda lines: "this is a test" in lines, "the message's body")
    assert "MESSAGE" in screen.lines and "destination: /queue/cli" in screen.lines
    cli.onecmd("unsubscribe /queue/cli")
    assert "Unsubscribing from '/queue/cli'" in screen.lines
    cli.onecmd("unsubscribe /queue/cli")
    assert "Subscription /queue/cli not found" in screen.lines
    assert cli.onecmd("quit") is True
    assert screen.lines[-1] == "Shutting down, please wait"
    assert not cli.conn.is_connected()


def test_the_passcode_is_never_printed(broker: BrokerThread) -> None:
    cli, screen = shell(broker)
    sent = [line for line in screen.lines if line.startswith("Sending {cmd=STOMP")]
    assert sent and "s3cret-pass" not in screen.text
    cli.onecmd("quit")


def test_sendrec_prints_the_receipt_and_sendreply_the_correlation(broker: BrokerThread) -> None:
    cli, screen = shell(broker)
    cli.onecmd("subscribe /queue/rec")
    cli.onecmd("sendrec /queue/rec asked for")
    screen.wait_for(lambda lines: "RECEIPT" in lines, "RECEIPT")
    cli.onecmd("sendreply /queue/rec corr-7 the answer")
    screen.wait_for(lambda lines: "correlation-id: corr-7" in lines, "the reply")
    cli.onecmd("quit")


def test_a_transaction_delivers_at_commit_and_never_at_abort(broker: BrokerThread) -> None:
    cli, screen = shell(broker)
    cli.onecmd("subscribe /queue/tx")
    cli.onecmd("begin")
    assert screen.lines[-1].startswith("Transaction id: ")
    cli.onecmd("send /queue/tx dropped")
    cli.onecmd("abort")
    assert screen.lines[-1].startswith("Aborted transaction: ")
    cli.onecmd("begin")
    cli.onecmd("begin")
    assert "Currently in a transaction" in screen.lines[-1]
    cli.onecmd("send /queue/tx kept")
    cli.onecmd("commit")
    screen.wait_for(lambda lines: "kept" in lines, "the committed message")
    cli.onecmd("sendrec /queue/tx after")  # the receipt: everything before it was seen
    screen.wait_for(lambda lines: "RECEIPT" in lines, "RECEIPT")
    assert "dropped" not in screen.lines
    cli.onecmd("commit")
    assert "Not currently in a transaction" in screen.lines[-1]
    cli.onecmd("quit")


def test_acks_take_the_ids_each_version_needs(broker: BrokerThread) -> None:
    cli, screen = shell(broker, "1.2")
    cli.onecmd("subscribe /queue/acks client-individual")
    cli.onecmd("send /queue/acks one")
    screen.wait_for(lambda lines: "one" in lines, "the message")
    [ack_id] = [line.split(": ", 1)[1] for line in screen.lines if line.startswith("ack: ")]
    cli.onecmd("ack")
    assert "Expecting: ack <ack-id>" in screen.lines[-1]
    cli.onecmd(f"ack {ack_id}")
    cli.onecmd("sendrec /queue/none settled")
    screen.wait_for(lambda lines: "RECEIPT" in lines, "RECEIPT")
    assert "ERROR" not in screen.lines
    cli.onecmd("quit")


def test_sendfile_sends_a_file_that_the_receiving_shell_saves(
    broker: BrokerThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = bytes(range(256)) * 4
    (tmp_path / "out").mkdir()
    source = tmp_path / "data.bin"
    source.write_bytes(payload)
    monkeypatch.chdir(tmp_path / "out")
    cli, screen = shell(broker)
    cli.onecmd("subscribe /queue/files")
    cli.onecmd(f'sendfile /queue/files {source} {{"x-kind": "sample"}}')
    screen.wait_for(lambda lines: "Saved file: data.bin" in lines, "the saved file")
    assert "x-kind: sample" in screen.lines
    assert (tmp_path / "out" / "data.bin").read_bytes() == payload
    cli.onecmd(f"sendfile /queue/files {source}")  # a second one never overwrites the first
    screen.wait_for(lambda lines: screen.count("MESSAGE") == 2, "the second file")
    saved = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(saved) == 2 and saved[0] == "data.bin", saved
    assert all((tmp_path / "out" / name).read_bytes() == payload for name in saved)
    cli.onecmd("sendfile /queue/files /no/such/file")
    assert "File /no/such/file does not exist" in screen.lines[-1]
    cli.onecmd("quit")


def test_stats_count_once_turned_on(broker: BrokerThread) -> None:
    cli, screen = shell(broker)
    cli.onecmd("stats")
    assert screen.lines[-1] == "No stats available"
    cli.onecmd("stats on")
    cli.onecmd("subscribe /queue/stats")
    cli.onecmd("send /queue/stats counted")
    screen.wait_for(lambda lines: "counted" in lines, "the message")
    cli.onecmd("stats")
    assert any(line == "Messages received: 1" for line in screen.lines), screen.lines
    cli.onecmd("quit")


def test_run_executes_a_file_of_commands(broker: BrokerThread, tmp_path: Path) -> None:
    commands = tmp_path / "commands.txt"
    commands.write_text("subscribe /queue/script\nsend /queue/script from a file\n\nnonsense\n")
    cli, screen = shell(broker)
    cli.onecmd(f"run {commands}")
    screen.wait_for(lambda lines: "from a file" in lines, "the scripted message")
    assert any("Unknown command: nonsense" in line for line in screen.lines)
    cli.onecmd("quit")


def test_help_covers_every_command(broker: BrokerThread) -> None:
    cli, screen = shell(broker)
    commands = sorted(name[3:] for name in dir(cli) if name.startswith("do_"))
    for command in commands:
        before = len(screen.text)
        cli.onecmd(f"help {command}")
        said = screen.text[before:]
        assert said and "No help on" not in said, (command, said)
    cli.onecmd("version")
    assert "[Protocol version 1.2]" in screen.lines[-1]
    cli.onecmd("quit")


def test_an_unknown_version_is_refused() -> None:
    with pytest.raises(RuntimeError, match="unknown STOMP version"):
        StompCLI(HOST, 1, "u", "p", "2.0")


def test_main_runs_a_file_of_commands(
    broker: BrokerThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = tmp_path / "commands.txt"
    commands.write_text("subscribe /queue/main\nsendrec /queue/main hello from main\n")
    common = ["-H", HOST, "-P", str(broker.port), "-U", "admin", "-W", "s3cret-pass"]
    assert main([*common, "-S", "1.2", "-F", str(commands)]) == 0
    out = capsys.readouterr().out
    assert "Subscribing to '/queue/main'" in out and "s3cret-pass" not in out
    assert main([*common, "--heartbeats", "nonsense"]) == 2


# -- multicast --------------------------------------------------------------------


def _group_port() -> int:
    """A UDP port free here, so that runs beside each other use groups of their own."""
    for _ in range(20):
        port = random.randrange(20_000, 30_000)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
        return port
    raise AssertionError("no free UDP port")


@pytest.fixture
def group() -> Iterator[Callable[[], tuple[MulticastConnection, TestListener]]]:
    port = _group_port()
    made: list[MulticastConnection] = []

    def join() -> tuple[MulticastConnection, TestListener]:
        conn = MulticastConnection(port=port)
        listener = TestListener("r")
        conn.set_listener("test", listener)
        conn.connect(wait=True)
        made.append(conn)
        return conn, listener

    try:
        yield join
    finally:
        for conn in made:
            conn.disconnect()


def test_a_send_reaches_every_subscriber_of_the_group(
    group: Callable[[], tuple[MulticastConnection, TestListener]],
) -> None:
    sender, own = group()
    other, theirs = group()
    idle, nobody = group()
    for conn in (sender, other):
        conn.subscribe("/queue/mc", id="1")
    idle.subscribe("/queue/elsewhere", id="1")
    sender.send("/queue/mc", "to all", receipt="r")
    # The receipt comes after the sender's own copy came back through the group.
    assert own.wait_on_receipt(WAIT)
    assert own.messages == 1
    assert theirs.wait_for_message(WAIT)
    headers, body = theirs.get_latest_message()
    assert body == b"to all" and headers["destination"] == "/queue/mc"
    assert "x-stomp-proto-multicast-sender" not in headers and "receipt" not in headers
    time.sleep(0.3)  # what a datagram takes on one machine, many times over
    assert nobody.messages == 0


def test_a_transaction_is_sent_at_commit_and_dropped_at_abort(
    group: Callable[[], tuple[MulticastConnection, TestListener]],
) -> None:
    conn, listener = group()
    conn.subscribe("/queue/tx", id="1")
    conn.begin("t1")
    conn.send("/queue/tx", "dropped", transaction="t1")
    conn.abort("t1")
    conn.begin("t2")
    conn.send("/queue/tx", "kept", transaction="t2", receipt="r")
    assert listener.messages == 0
    conn.commit("t2")
    assert listener.wait_on_receipt(WAIT)
    assert [body for _, body in listener.message_list] == [b"kept"]
    conn.commit("t2")  # no such transaction any more: an ERROR, and the session goes on
    deadline = time.monotonic() + WAIT
    while listener.errors == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert listener.errors == 1 and conn.is_connected()


def test_unsubscribe_stops_deliveries(
    group: Callable[[], tuple[MulticastConnection, TestListener]],
) -> None:
    conn, listener = group()
    conn.subscribe("/queue/un", id="1")
    conn.send("/queue/un", "one", receipt="r")
    assert listener.wait_on_receipt(WAIT)
    conn.unsubscribe("1")
    listener.receipt = "r2"
    conn.send("/queue/un", "two", receipt="r2")
    assert listener.wait_on_receipt(WAIT)
    assert listener.messages == 1


def test_a_datagram_that_is_not_a_send_is_ignored(
    group: Callable[[], tuple[MulticastConnection, TestListener]],
) -> None:
    conn, listener = group()
    conn.subscribe("/queue/noise", id="1")
    port = conn.transport.host_and_ports[0][1]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as noise:
        noise.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        for datagram in (b"\x00\xff garbage", b"MESSAGE\ndestination:/queue/noise\n\nx\x00"):
            noise.sendto(datagram, ("224.1.1.1", port))
    conn.send("/queue/noise", base64.b64encode(b"real"), receipt="r")
    assert listener.wait_on_receipt(WAIT)
    assert [body for _, body in listener.message_list] == [base64.b64encode(b"real")]
    assert conn.is_connected()
