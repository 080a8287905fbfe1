"""Both builds side by side in one process, on the same input: the differential fuzz target.

``stomp_proto`` is the build installed - the accelerated one wherever the native
extension is built.  :func:`pure_twin` loads a second copy of the same source files
as the package ``stomp_proto_pure``, importing it with ``STOMP_PROTO_NO_EXTENSIONS``
set: the pure build, as a machine without the extension runs it.  Only the public API
is called, so the comparison holds however the native code is split into modules.

An input is a script: its first byte picks a scenario and the rest drives calls on
the public API - the decoder fed in arbitrary pieces, the encoder, a server fed a
client's bytes, a client session (every event sent, messages received, iterated,
acknowledged).  The script runs once per package; every value returned and every
exception raised (its type, and for protocol errors the kind, limit, message and
ERROR hint) is written to a trace, and the two traces must be equal.
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import stomp_proto

VERSIONS = ("1.0", "1.1", "1.2")
TWIN = "stomp_proto_pure"
_twin: ModuleType | None = None


def pure_twin() -> ModuleType:
    """The pure build of this ``stomp_proto``'s sources, as ``stomp_proto_pure`` (loaded once)."""
    global _twin
    if _twin is None:
        package = Path(stomp_proto.__file__).parent
        spec = importlib.util.spec_from_file_location(
            TWIN, package / "__init__.py", submodule_search_locations=[str(package)]
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        saved = os.environ.get("STOMP_PROTO_NO_EXTENSIONS")
        os.environ["STOMP_PROTO_NO_EXTENSIONS"] = "1"
        sys.modules[TWIN] = module
        try:
            spec.loader.exec_module(module)
        finally:
            if saved is None:
                del os.environ["STOMP_PROTO_NO_EXTENSIONS"]
            else:
                os.environ["STOMP_PROTO_NO_EXTENSIONS"] = saved
        assert module.BUILD == "pure", module.BUILD
        _twin = module
    return _twin


def check_builds_agree(data: bytes, *, unbounded: bool = False) -> None:
    """The differential property: the installed build and the pure one trace ``data`` alike.

    ``unbounded``: the script's limits are picked from values around and past what a C
    integer holds (:data:`UNBOUNDED`), not small ones.
    """
    ours = run_script(stomp_proto, data, unbounded)
    pure = run_script(pure_twin(), data, unbounded)
    if ours != pure:
        pairs = zip([*ours, None], [*pure, None], strict=False)
        at = next(i for i, (a, b) in enumerate(pairs) if a != b)
        raise AssertionError(
            f"{stomp_proto.BUILD} and pure builds differ at step {at}:\n"
            f"  {stomp_proto.BUILD}: {ours[at] if at < len(ours) else '(end)'}\n"
            f"  pure: {pure[at] if at < len(pure) else '(end)'}"
        )


# -------------------------------------------------------------------------- the script


class Script:
    """The input read as choices; past its end every choice is the first one."""

    def __init__(self, data: bytes, unbounded: bool = False) -> None:
        self.data = data
        self.at = 0
        self.unbounded = unbounded

    def byte(self) -> int:
        if self.at >= len(self.data):
            return 0
        self.at += 1
        return self.data[self.at - 1]

    @property
    def left(self) -> bool:
        return self.at < len(self.data)

    def pick(self, choices: tuple[Any, ...] | list[Any]) -> Any:
        return choices[self.byte() % len(choices)]

    def blob(self, most: int = 24) -> bytes:
        size = min(self.byte() % (most + 1), len(self.data) - self.at)
        self.at += size
        return self.data[self.at - size : self.at]

    def text(self) -> str:
        return self.blob(12).decode("utf-8", "replace")

    def rest(self) -> bytes:
        rest = self.data[self.at :]
        self.at = len(self.data)
        return rest


Trace = list[str]


def shown(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(item) for item in value) + "]"
    return repr(value)


def failure(exc: BaseException) -> str:
    kind = getattr(exc, "kind", None)
    if kind is None:
        return f"raised {type(exc).__name__}"
    hint = getattr(exc, "event_hint", None)
    return f"raised {type(exc).__name__}({kind.name}, {exc.limit!r}, {exc.message!r}) {hint!r}"  # type: ignore[attr-defined]


#: What :func:`attempt` returns for a call that raised.
FAILED = object()


def attempt(trace: Trace, call: Callable[[], object]) -> object:
    """``call()``, its value or its exception written to ``trace``; the value or FAILED."""
    try:
        value = call()
    except Exception as exc:  # every exception: the builds must raise the same one
        trace.append(failure(exc))
        return FAILED
    trace.append(shown(value))
    return value


def run_script(api: ModuleType, data: bytes, unbounded: bool = False) -> Trace:
    script = Script(data, unbounded)
    scenario = SCENARIOS[script.byte() % len(SCENARIOS)]
    trace: Trace = [scenario.__name__]
    scenario(api, script, trace)
    return trace


#: What the unbounded target's limits are made of: small ones (to reach the limits), the
#: defaults, and values around the native code's clamp (2**60 - 1 on 64 bits), C's
#: largest integer and past it.  Limits have no upper bound: a broker's
#: ``--max-body-size`` may be 2**64.
UNBOUNDED = (None, 2**60 - 1, 2**60, 2**63 - 1, 2**63, 2**64, 10**20, 40)


def _limits(api: ModuleType, script: Script) -> Any:
    if script.unbounded:
        # One byte per limit: the default (None) or one of UNBOUNDED, for each field.
        values = {}
        for name in ("max_line_length", "max_headers", "max_head_size"):
            values[name] = UNBOUNDED[script.byte() % len(UNBOUNDED)]
        # The body and the frame: mostly past C's range, the cases the clamp is for.
        for name in ("max_body_size", "max_frame_size"):
            values[name] = UNBOUNDED[(script.byte() + 5) % len(UNBOUNDED)]
        return api.Limits(**{name: value for name, value in values.items() if value is not None})
    if script.byte() & 1:
        return None
    small = 1 + script.byte() % 64
    return api.Limits(
        max_line_length=small,
        max_headers=1 + small % 8,
        max_head_size=2 * small,
        max_body_size=small,
        max_frame_size=3 * small,
    )


def _chunks(script: Script) -> Iterator[bytes]:
    """The rest of the script, whole or in random pieces (the next byte seeds them)."""
    seed = script.byte()
    stream = script.rest()
    if not seed:
        yield stream
        return
    rng = random.Random(seed)
    largest = seed % 32 + 1
    pos = 0
    while pos < len(stream):
        size = rng.randint(1, largest)
        yield stream[pos : pos + size]
        pos += size


# -------------------------------------------------------------------------- the scenarios


def decoder(api: ModuleType, script: Script, trace: Trace) -> None:
    """A FrameDecoder fed arbitrary bytes in arbitrary pieces, drained each time."""
    config = script.byte()
    made = attempt(
        trace,
        lambda: api.FrameDecoder(
            VERSIONS[config % 3], strict=not config & 4, limits=_limits(api, script)
        ),
    )
    if made is FAILED:
        return
    trace[-1] = "made"  # not the object's address
    frames: Any = made
    by_iteration = bool(config & 8)
    for chunk in [*_chunks(script), None]:
        if attempt(trace, lambda chunk=chunk: frames.receive_data(chunk)) is FAILED:
            return
        drained = (lambda: list(frames)) if by_iteration else (lambda: _drain(frames.next_frame))
        attempt(trace, drained)
        trace.append(f"buffered={frames.buffered}")


def _drain(next_item: Callable[[], object]) -> list[object]:
    items = []
    while (item := next_item()) is not None:
        items.append(item)
    return items


COMMANDS = (
    "SEND", "MESSAGE", "CONNECT", "CONNECTED", "STOMP", "ACK", "NACK", "ERROR", "RECEIPT",
    "SUBSCRIBE", "BEGIN", "DISCONNECT", "send", "",
)  # fmt: skip
NAMES = ("destination", "content-length", "receipt", "id", "x", "a:b", "a\nb", "c\r", "\\", "")
VALUES = ("/q/a", "12", "", "a\\b", "a:b", "l\nf", "c\rr", "é", "\x00", " v ")


def _headers(script: Script) -> tuple[tuple[str, str], ...]:
    return tuple(
        (script.pick(NAMES), script.pick(VALUES) if script.byte() & 1 else script.text())
        for _ in range(script.byte() % 4)
    )


def encoder(api: ModuleType, script: Script, trace: Trace) -> None:
    """FrameEncoder on frames of every command, with headers and bodies that need
    escaping, refusing or a content-length."""
    while script.left:
        coder = api.FrameEncoder(script.pick(VERSIONS))
        frame = api.Frame(script.pick(COMMANDS), _headers(script), script.blob())
        attempt(trace, partial(coder.encode, frame, content_length=bool(script.byte() & 1)))


def server(api: ModuleType, script: Script, trace: Trace) -> None:
    """A ServerConnection fed a client's bytes, answering as a small broker does."""
    config = script.byte()
    conn = api.ServerConnection(strict=not config & 4, limits=_limits(api, script))
    events = iter(conn)
    for chunk in [*_chunks(script), None]:
        attempt(trace, lambda chunk=chunk: conn.receive_data(chunk))
        while True:
            event = attempt(trace, lambda: next(events, None))
            if event is None or event is FAILED:
                break
            for reply in _replies(api, conn, event):
                attempt(trace, lambda reply=reply: conn.send(reply))
        trace.append(f"{conn.state.name} {conn.dropped} {conn.ended_by!r}")


def _replies(api: ModuleType, conn: Any, event: object) -> list[object]:
    if isinstance(event, api.Connect):
        return [api.Connected(heartbeat=event.heartbeat[::-1], session="s")]
    replies: list[object] = []
    if isinstance(event, api.Subscribe):
        ident = f"m-{event.id}"
        ack = ident if conn.version == "1.2" and event.ack != "auto" else None
        replies.append(
            api.Message(event.destination, ident, subscription=event.id, ack=ack, body=b"x")
        )
    receipt = getattr(event, "receipt", None)
    if receipt is not None:
        replies.append(api.Receipt(receipt))
    if isinstance(event, api.Send) and event.body == b"error":
        replies.append(api.Error("asked for", receipt_id=receipt))
    return replies


SUBSCRIPTIONS = ("s0", "s1", "s2")
ACK_MODES = ("client-individual", "client", "auto")
TRANSACTIONS = ("t0", "t1", None)
RECEIPTS = (None, None, "r0", "r1")


class _Client:
    """One client session: the connection, its live iterator and what it received."""

    def __init__(self, api: ModuleType, script: Script, trace: Trace) -> None:
        self.api = api
        self.script = script
        self.trace = trace
        config = script.byte()
        self.version = VERSIONS[config % 3]
        self.conn = api.ClientConnection(strict=not config & 4, limits=_limits(api, script))
        self.events = iter(self.conn)
        trace.append(f"iter(iterator) is iterator: {iter(self.events) is self.events}")
        self.messages: list[Any] = []
        beats = (script.byte() % 3 * 500, script.byte() % 3 * 500)
        self.send(api.Connect(host="/", accept_versions=(self.version,), heartbeat=beats))
        self.receive(
            b"CONNECTED\nversion:%s\nheart-beat:%d,%d\n\n\x00"
            % (self.version.encode(), beats[1], beats[0])
        )
        self.take(100)

    def send(self, event: object) -> None:
        self.attempt(lambda: self.conn.send(event))

    def attempt(self, call: Callable[[], object]) -> object:
        return attempt(self.trace, call)

    def receive(self, data: bytes | None) -> None:
        self.attempt(lambda: self.conn.receive_data(data))

    def take(self, most: int) -> None:
        """Up to ``most`` events through the live iterator (kept across reads)."""
        for _ in range(most):
            event = self.attempt(lambda: next(self.events, None))
            if event is None or event is FAILED:
                return
            if isinstance(event, self.api.Message):
                self.messages.append(event)

    def step(self) -> None:
        api, script = self.api, self.script
        op = script.byte() % 12
        if op == 0:
            self.send(
                api.Send(
                    script.pick(("/q/a", "/q/b")),
                    script.blob(),
                    content_type=script.pick((None, "text/plain", "a\nb")),
                    transaction=script.pick((*TRANSACTIONS, "unknown")),
                    receipt=script.pick(RECEIPTS),
                    headers=_headers(script),
                    content_length=bool(script.byte() & 1),
                )
            )
        elif op == 1:
            ident = script.pick(SUBSCRIPTIONS)
            ack = script.pick(ACK_MODES)
            self.send(
                api.Subscribe(f"/q/{ident}", id=ident, ack=ack, receipt=script.pick(RECEIPTS))
            )
        elif op == 2:
            self.send(api.Unsubscribe(script.pick(SUBSCRIPTIONS), receipt=script.pick(RECEIPTS)))
        elif op == 3:
            cls = script.pick((api.Begin, api.Commit, api.Abort))
            self.send(cls(script.pick(TRANSACTIONS[:2]), receipt=script.pick(RECEIPTS)))
        elif op in (4, 5):
            self.receive(self._server_bytes())
        elif op == 6:
            self.take(1 + script.byte() % 4)
        elif op == 7 and self.messages:
            message = self.messages[script.byte() % len(self.messages)]
            settle = self.conn.ack if script.byte() & 1 else self.conn.nack
            transaction = script.pick((None, None, "t0", "unknown"))
            receipt = script.pick(RECEIPTS)
            self.attempt(lambda: settle(message, transaction=transaction, receipt=receipt))
        elif op == 8:
            self.send(api.HeartBeat())
            self.attempt(lambda: self.conn.handle_timer(script.byte() / 100))
        elif op == 9:
            self.send(api.Disconnect(receipt=script.pick(RECEIPTS)))
        elif op == 10:
            # What a client may not send, built by hand.
            self.send(script.pick((api.Receipt("r"), api.Error("e"), "SEND", api.Frame("SEND"))))
        elif op == 11:
            self.receive(script.pick((None, script.blob())))
        conn = self.conn
        pending = [conn.pending_acks(ident) for ident in SUBSCRIPTIONS]
        receipts = sorted(conn.pending_receipts)
        self.trace.append(f"{conn.state.name} {sorted(conn.transactions)} {pending} {receipts}")

    def _server_bytes(self) -> bytes:
        script = self.script
        kind = script.byte() % 6
        sub = script.pick(SUBSCRIPTIONS)
        n = script.byte() % 4
        if kind <= 2:
            ack = b"ack:a%d\n" % n if kind != 2 else b""
            return b"MESSAGE\ndestination:/q/%s\nmessage-id:m%d\nsubscription:%s\n%s%s\n%s\x00" % (
                sub.encode(),
                n,
                sub.encode(),
                ack,
                script.blob(8),
                script.blob(),
            )
        if kind == 3:
            return b"RECEIPT\nreceipt-id:%s\n\n\x00" % script.pick(RECEIPTS[2:]).encode()
        if kind == 4:
            return b"\n" * (1 + n)
        return b"ERROR\nmessage:%s\n\n\x00" % script.blob(8)


def client(api: ModuleType, script: Script, trace: Trace) -> None:
    """A client session: every event sent, server frames received and iterated,
    messages acknowledged, the session ended."""
    session = _Client(api, script, trace)
    while script.left:
        session.step()
    session.receive(None)
    session.take(100)


SCENARIOS: tuple[Callable[[ModuleType, Script, Trace], None], ...] = (
    decoder,
    encoder,
    server,
    client,
    client,
)
