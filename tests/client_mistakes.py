"""Client mistakes, sent byte for byte to a broker, and what the broker does with each.

Each :class:`Mistake` is a short raw-socket session: a CONNECT (or the
mistaken CONNECT itself), then the frames that carry the mistake, then a
frame that proves the session still works.  :func:`probe` plays one against
a broker and classifies the answer:

``accepted``
    the session went on as the client meant it (a CONNECT row says which
    version was negotiated: ``CONNECTED 1.0``);
``misread``
    the broker went on, but not as the client meant (the message went
    elsewhere, or a header changed);
``ERROR``
    the broker answered with an ERROR frame;
``closed``
    the broker closed the connection without an ERROR;
``no answer``
    nothing conclusive within the time limit.

``tests/test_client_mistakes.py`` runs every mistake against RabbitMQ,
ActiveMQ and the embedded broker (lenient, and ``strict=True``), checks the
lenient mode against the real brokers, and checks that the table in
docs/interop.rst is what was measured.  Run as a script, this module prints
that table from a fresh run (the brokers' ports as in tests/brokers.py)::

    python tests/client_mistakes.py

Like ``brokers``, this module is imported by name (pytest puts ``tests/`` on
``sys.path``).
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stomp_proto import Frame, FrameDecoder, HeartBeat, RemoteProtocolError

if TYPE_CHECKING:
    # Where to probe and as whom: a broker's port, vhost, login and passcode.
    from brokers import Endpoint

__all__ = [
    "ACCEPTED",
    "COLUMNS",
    "MISTAKES",
    "REFUSED",
    "Mistake",
    "parse_table",
    "probe",
    "render_table",
]

HOST = "127.0.0.1"
#: Seconds one probe may take.
TIMEOUT = 5.0
#: The outcomes that let the client go on as it meant, and those that stop it.
ACCEPTED = ("accepted", "CONNECTED 1.0", "CONNECTED 1.1", "CONNECTED 1.2")
REFUSED = ("ERROR", "closed")
#: The table's columns after the mistake, in order.
COLUMNS = ("RabbitMQ", "ActiveMQ", "embedded lenient", "embedded strict")


@dataclass(frozen=True)
class Mistake:
    """One client mistake and how to play it.

    ``frames`` builds the bytes after the CONNECT (``Q`` is a fresh queue
    name); with ``connect`` the whole session, CONNECT included.  ``check``
    says what success is: ``connected`` (a CONNECTED, then the RECEIPT of a
    DISCONNECT), ``receipt`` (the RECEIPT ``end``), or ``delivered`` (the
    mistaken SEND's body ``hello`` reaches the subscription ``s`` on ``Q``
    before the correct ``end`` message does).
    """

    key: str
    text: str
    check: str
    version: str = "1.2"
    frames: Callable[[Endpoint, str], bytes] | None = None
    connect: Callable[[Endpoint], bytes] | None = None
    #: For ``delivered``: the header the MESSAGE must carry for it to count as read right.
    header: tuple[str, str] | None = None


def connect_frame(
    t: Endpoint, version: str | None = "1.2", *, command: str = "CONNECT", extra: str = ""
) -> bytes:
    """A correct CONNECT for ``t`` (``version`` None: no accept-version), plus ``extra`` lines."""
    lines = [command]
    if version is not None:
        lines.append(f"accept-version:{version}")
    lines += [f"host:{t.vhost}", f"login:{t.login}", f"passcode:{t.passcode}"]
    return ("\n".join(lines) + "\n" + extra + "\n\0").encode()


def _without(line: str) -> Callable[[Endpoint], bytes]:
    def build(t: Endpoint) -> bytes:
        return connect_frame(t).replace(line.format(t=t).encode() + b"\n", b"")

    return build


def _replace(old: str, new: str, version: str | None = "1.2") -> Callable[[Endpoint], bytes]:
    def build(t: Endpoint) -> bytes:
        data = connect_frame(t, version)
        assert old.format(t=t).encode() in data
        return data.replace(old.format(t=t).encode(), new.format(t=t).encode(), 1)

    return build


def _send(
    head: str = "SEND\ndestination:{q}\n", body: str = "hello", *, eol: str = "\n"
) -> Callable[[Endpoint, str], bytes]:
    """A SEND to the queue (``head`` up to its last header), receipt r1, as bytes."""

    def build(t: Endpoint, q: str) -> bytes:
        frame = head.format(q=q) + "receipt:r1\n\n"
        return frame.replace("\n", eol).encode() + body.encode() + b"\0"

    return build


def _frames(text: str) -> Callable[[Endpoint, str], bytes]:
    """Literal frames (``{q}`` is the queue), separated by ``|`` for NULs."""

    def build(t: Endpoint, q: str) -> bytes:
        return text.format(q=q).replace("|", "\0").encode()

    return build


MISTAKES: tuple[Mistake, ...] = (
    # -- the CONNECT frame ---------------------------------------------------------------
    Mistake("no-host-11", "CONNECT for 1.1 without ``host``", "connected",
            connect=lambda t: connect_frame(t, "1.1").replace(f"host:{t.vhost}\n".encode(), b"")),
    Mistake("no-host-12", "CONNECT for 1.2 without ``host``", "connected",
            connect=_without("host:{t.vhost}")),
    Mistake("stomp-no-host", "STOMP for 1.1 without ``host`` (stomp.py's default)", "connected",
            connect=lambda t: connect_frame(t, "1.1", command="STOMP").replace(
                f"host:{t.vhost}\n".encode(), b"")),
    Mistake("no-accept-version", "CONNECT without ``accept-version`` (a 1.0 client)",
            "connected", connect=lambda t: connect_frame(t, None)),
    Mistake("stomp-no-accept-version", "STOMP without ``accept-version``", "connected",
            connect=lambda t: connect_frame(t, None, command="STOMP")),
    Mistake("accept-version-case", "``Accept-Version:1.2`` (header name case)", "connected",
            connect=_replace("accept-version:", "Accept-Version:")),
    Mistake("accept-version-blanks", "``accept-version:1.0, 1.1, 1.2`` (blanks in the list)",
            "connected", connect=_replace("accept-version:1.2", "accept-version:1.0, 1.1, 1.2")),
    Mistake("accept-version-unknown", "``accept-version:1.1,2.0`` (an unknown version too)",
            "connected", connect=_replace("accept-version:1.2", "accept-version:1.1,2.0")),
    Mistake("host-case", "``Host:`` instead of ``host:``", "connected",
            connect=_replace("host:", "Host:")),
    Mistake("login-case", "``Login``/``Passcode`` (header name case), wrong passcode [#anon]_",
            "connected",
            connect=_replace("login:{t.login}\npasscode:{t.passcode}",
                             "Login:{t.login}\nPasscode:wrong")),
    Mistake("username", "``username``/``password`` (the early draft's names), wrong password "
            "[#anon]_", "connected",
            connect=_replace("login:{t.login}\npasscode:{t.passcode}",
                             "username:{t.login}\npassword:wrong")),
    Mistake("lowercase-connect", "``connect`` (lower-case command)", "connected",
            connect=_replace("CONNECT", "connect")),
    Mistake("command-blank", "``CONNECT`` followed by a blank on its line", "connected",
            connect=_replace("CONNECT\n", "CONNECT \n")),
    Mistake("connect-value-blank", "a blank after the ``login`` value", "connected",
            connect=_replace("login:{t.login}", "login:{t.login} ")),
    Mistake("connect-colon-blank", "a blank after the colon of ``login:``", "connected",
            connect=_replace("login:{t.login}", "login: {t.login}")),
    Mistake("eols-before-connect", "EOLs (LF, CR LF) before CONNECT", "connected",
            connect=lambda t: b"\n\r\n\n" + connect_frame(t)),
    Mistake("connect-crlf", "CONNECT with CR LF line endings, 1.1", "connected",
            connect=lambda t: connect_frame(t, "1.1").replace(b"\n", b"\r\n")),
    Mistake("connect-body", "a body on CONNECT", "connected",
            connect=lambda t: connect_frame(t)[:-1] + b"hello\0"),
    Mistake("connect-receipt", "``receipt`` on CONNECT", "connected",
            connect=lambda t: connect_frame(t, extra="receipt:r0\n")),
    Mistake("heart-beat-one", "``heart-beat:1000`` (one number)", "connected",
            connect=lambda t: connect_frame(t, extra="heart-beat:1000\n")),
    Mistake("heart-beat-blanks", "``heart-beat: 0, 0`` (blanks)", "connected",
            connect=lambda t: connect_frame(t, extra="heart-beat: 0, 0\n")),
    # -- framing in a session ------------------------------------------------------------
    Mistake("crlf-10", "CR LF line endings in a 1.0 session", "delivered", version="1.0",
            frames=_send(eol="\r\n")),
    Mistake("crlf-11", "CR LF line endings in a 1.1 session", "delivered", version="1.1",
            frames=_send(eol="\r\n")),
    Mistake("crlf-between-11", "CR LF after the NUL of a frame, 1.1", "delivered", version="1.1",
            frames=lambda t, q: _send()(t, q) + b"\r\n"),
    Mistake("crlf-between-10", "CR LF after the NUL of a frame, 1.0", "delivered", version="1.0",
            frames=lambda t, q: _send()(t, q) + b"\r\n"),
    Mistake("lowercase-send", "``send`` (lower-case command)", "delivered",
            frames=_send("send\ndestination:{q}\n")),
    Mistake("unknown-command", "an unknown command ``FOO``", "receipt",
            frames=_frames("FOO\n\n|")),
    Mistake("header-name-case", "``Destination:`` (header name case) on SEND", "delivered",
            frames=_send("SEND\nDestination:{q}\n")),
    Mistake("value-blank", "a blank after the ``destination`` value", "delivered",
            frames=_send("SEND\ndestination:{q} \n")),
    Mistake("colon-blank", "a blank after the colon of ``destination:``", "delivered",
            frames=_send("SEND\ndestination: {q}\n")),
    Mistake("undefined-escape", "an undefined escape ``\\t`` in a header value, 1.2",
            "delivered", frames=_send("SEND\ndestination:{q}\nx-a:a\\tb\n"),
            header=("x-a", "a\\tb")),
    Mistake("body-on-subscribe", "a body on SUBSCRIBE", "receipt",
            frames=_frames("SUBSCRIBE\nid:b1\ndestination:{q}-b\n\nbody|")),
    Mistake("body-on-begin", "a body on BEGIN", "receipt",
            frames=_frames("BEGIN\ntransaction:t1\n\nbody|")),
    # -- content-length ------------------------------------------------------------------
    Mistake("content-length-blanks", "``content-length`` with blanks around its digits",
            "delivered", frames=_send("SEND\ndestination:{q}\ncontent-length: 5 \n")),
    Mistake("content-length-case", "``Content-Length:5`` (header name case)", "delivered",
            frames=_send("SEND\ndestination:{q}\nContent-Length:5\n")),
    Mistake("content-length-short", "``content-length`` shorter than the body", "delivered",
            frames=_send("SEND\ndestination:{q}\ncontent-length:3\n")),
    Mistake("content-length-empty", "``content-length:`` (empty)", "delivered",
            frames=_send("SEND\ndestination:{q}\ncontent-length:\n")),
    Mistake("content-length-text", "``content-length:five``", "delivered",
            frames=_send("SEND\ndestination:{q}\ncontent-length:five\n")),
    Mistake("content-length-negative", "``content-length:-1``", "delivered",
            frames=_send("SEND\ndestination:{q}\ncontent-length:-1\n")),
    # -- session rules ---------------------------------------------------------------------
    Mistake("subscribe-no-id-11", "SUBSCRIBE without ``id``, 1.1", "receipt", version="1.1",
            frames=_frames("SUBSCRIBE\ndestination:{q}-n\n\n|")),
    Mistake("duplicate-subscription", "two SUBSCRIBEs with the same ``id``", "receipt",
            frames=_frames("SUBSCRIBE\nid:d\ndestination:{q}-1\n\n|"
                           "SUBSCRIBE\nid:d\ndestination:{q}-2\n\n|")),
    Mistake("nack-10", "NACK in a 1.0 session", "receipt", version="1.0",
            frames=_frames("NACK\nmessage-id:nope\n\n|")),
    Mistake("ack-unknown", "ACK of an unknown ``id``", "receipt",
            frames=_frames("ACK\nid:nope\n\n|")),
    Mistake("commit-unknown", "COMMIT of a transaction never begun", "receipt",
            frames=_frames("COMMIT\ntransaction:nope\n\n|")),
    Mistake("unsubscribe-unknown", "UNSUBSCRIBE of an unknown ``id``", "receipt",
            frames=_frames("UNSUBSCRIBE\nid:nope\n\n|")),
    Mistake("send-no-destination", "SEND without ``destination``", "receipt",
            frames=_frames("SEND\n\nx|")),
    Mistake("send-before-connect", "SEND before CONNECT", "receipt",
            connect=lambda t: b"SEND\ndestination:/queue/x\n\nx\0"),
    Mistake("second-connect", "a second CONNECT in the session", "receipt",
            frames=lambda t, q: connect_frame(t)),
)  # fmt: skip

_queues = itertools.count()


def _queue(key: str) -> str:
    return f"/queue/mistake-{key}-{time.time_ns()}-{next(_queues)}"


def _session(mistake: Mistake, t: Endpoint, q: str) -> bytes:
    """All the bytes of the probe, sent at once."""
    connect = (
        mistake.connect(t) if mistake.connect is not None else connect_frame(t, mistake.version)
    )
    if mistake.check == "connected":
        return connect + b"DISCONNECT\nreceipt:end\n\n\0"
    assert mistake.frames is not None or mistake.check == "receipt"
    frames = mistake.frames(t, q) if mistake.frames is not None else b""
    if mistake.check == "receipt":
        # Whatever went before, a well-formed frame asks for the RECEIPT "end".
        return connect + frames + b"BEGIN\ntransaction:end-tx\nreceipt:end\n\n\0"
    subscribe = f"SUBSCRIBE\nid:s\ndestination:{q}\nack:auto\n\n\0".encode()
    last = f"SEND\ndestination:{q}\n\nend\0".encode()
    return connect + subscribe + frames + last


def _read_frames(
    sock: socket.socket, version: str, done: Callable[[list[Frame]], bool]
) -> tuple[list[Frame], bool]:
    """Frames read until ``done`` says so, an ERROR, EOF or the time limit; and whether EOF."""
    # Lenient, so that whatever a broker answers is read; the version's escapes apply.
    decoder = FrameDecoder(version, strict=False)  # type: ignore[arg-type]
    frames: list[Frame] = []
    deadline = time.monotonic() + TIMEOUT
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return frames, False
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            return frames, False
        except ConnectionResetError:
            data = b""
        decoder.receive_data(data or None)
        try:
            while (item := decoder.next_frame()) is not None:
                if not isinstance(item, HeartBeat):
                    frames.append(item)
        except RemoteProtocolError:
            return frames, True
        if not data:
            return frames, True
        if done(frames) or any(f.command == "ERROR" for f in frames):
            return frames, False


def _classify(mistake: Mistake, frames: Sequence[Frame], eof: bool, q: str) -> str:
    commands = [f.command for f in frames]
    if mistake.check == "connected":
        if "CONNECTED" in commands:
            connected = frames[commands.index("CONNECTED")]
            return f"CONNECTED {connected.get('version') or '1.0'}"
    elif mistake.check == "receipt":
        if "ERROR" not in commands and any(f.get("receipt-id") == "end" for f in frames):
            return "accepted"
    else:
        if "ERROR" not in commands and any(f.body == b"end" for f in frames):
            hello = [f for f in frames if f.command == "MESSAGE" and f.body != b"end"]
            if not hello:
                return "misread"
            message = hello[0]
            if message.body != b"hello" or message.get("destination") != q:
                return "misread"
            if mistake.header is not None and message.get(mistake.header[0]) != mistake.header[1]:
                return "misread"
            return "accepted"
    if "ERROR" in commands:
        return "ERROR"
    return "closed" if eof else "no answer"


def _finished(mistake: Mistake) -> Callable[[list[Frame]], bool]:
    if mistake.check == "delivered":
        return lambda frames: any(f.body == b"end" for f in frames)
    return lambda frames: any(f.get("receipt-id") == "end" for f in frames)


def probe(mistake: Mistake, target: Endpoint) -> str:
    """Play ``mistake`` against the broker at ``target``; the outcome (see the module doc)."""
    q = _queue(mistake.key)
    with socket.create_connection((HOST, target.port), timeout=TIMEOUT) as sock:
        sock.sendall(_session(mistake, target, q))
        frames, eof = _read_frames(sock, mistake.version, _finished(mistake))
    return _classify(mistake, frames, eof, q)


# -- the table in docs/interop.rst ----------------------------------------------------------


def render_table(outcomes: dict[str, dict[str, str]]) -> str:
    """The list-table of ``outcomes`` (mistake key -> column -> outcome), as in the docs."""
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 40 15 15 15 15",
        "",
        "   * - mistake",
        *(f"     - {column}" for column in COLUMNS),
    ]
    for mistake in MISTAKES:
        row = outcomes[mistake.key]
        lines.append(f"   * - {mistake.text}")
        lines += [f"     - {row[column]}" for column in COLUMNS]
    return "\n".join(lines) + "\n"


def parse_table(text: str) -> dict[str, dict[str, str]]:
    """The outcomes written in a table that :func:`render_table` made (rows by mistake text)."""
    by_text = {m.text: m.key for m in MISTAKES}
    rows: dict[str, dict[str, str]] = {}
    cells: list[str] = []

    def flush() -> None:
        if cells and cells[0] in by_text:
            rows[by_text[cells[0]]] = dict(zip(COLUMNS, cells[1:], strict=True))
        cells.clear()

    for line in text.splitlines():
        if line.startswith("   * - "):
            flush()
            cells.append(line[len("   * - ") :])
        elif line.startswith("     - "):
            cells.append(line[len("     - ") :])
        elif not line.strip() and cells and len(cells) == len(COLUMNS) + 1:
            flush()
    flush()
    return rows


if __name__ == "__main__":
    import asyncio
    import os
    import sys
    import threading

    sys.path.insert(0, os.path.dirname(__file__))  # run as a script

    from brokers import Endpoint, real_broker

    from stomp_proto.broker import Broker

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    async def start(strict: bool) -> Broker:
        broker = Broker(HOST, 0, strict=strict)
        await broker.start()
        return broker

    targets = {"RabbitMQ": real_broker("rabbitmq"), "ActiveMQ": real_broker("activemq")}
    for column, strict in (("embedded lenient", False), ("embedded strict", True)):
        broker = asyncio.run_coroutine_threadsafe(start(strict), loop).result(10)
        targets[column] = Endpoint("embedded", broker.port)
    table = {m.key: {c: probe(m, t) for c, t in targets.items()} for m in MISTAKES}
    print(render_table(table))
