"""Replay the fuzz corpora and recorded sessions, printing everything that comes out.

    python tests/build_probe.py [SESSIONS]
    python tests/build_probe.py --splits

tests/test_accelerated_build.py runs this once under the pure-Python build and once
under the accelerated one (each in a subprocess, ``stomp_proto`` found first on
PYTHONPATH) and compares the outputs line by line: they must be identical.  The first line names the
build (``stomp_proto.BUILD``); then one line per input, holding every frame or event
produced (its repr), every byte sent back, and every error raised (its type, kind,
limit and message; for a server, the ERROR it hints at and its bytes), then what the
connection says after it (state, frames dropped, the error again).

The inputs: every file of tests/fuzzing/corpus/ and tests/fuzzing/regressions/, read
by its target as the fuzz harnesses read it (tests/fuzzing/properties.py), and
SESSIONS (default 200) whole sessions that tests/fuzzing/sessions.py writes from
fixed seeds, for each side, fed whole and in random chunks.

``--splits`` feeds every corpus input of the decoder, client and server targets
whose stream is short (under :data:`SPLIT_BELOW` bytes) in every two-chunk split
and byte by byte, and prints one digest per input of all those traces: the
native code's partial-frame hand-over to the pure code is then tried at every
offset of every frame.
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

# This file's directory, for the fuzzing package (stomp_proto comes from PYTHONPATH).
TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))

from fuzzing.differential import run_script  # noqa: E402
from fuzzing.properties import (  # noqa: E402
    ACK_MODES,
    CLIENT_RECEIPTS,
    CLIENT_SUBSCRIPTIONS,
    Case,
    _server_replies,
    _subscribe,
    _wants_ack,
)
from fuzzing.sessions import client_script, server_script  # noqa: E402
from fuzzing.streams import random_cuts, recipe_stream  # noqa: E402

import stomp_proto  # noqa: E402
from stomp_proto import (  # noqa: E402
    ClientConnection,
    Connect,
    Connected,
    FrameDecoder,
    FrameEncoder,
    Message,
    ProtocolError,
    RemoteProtocolError,
    ServerConnection,
    Subscribe,
)
from stomp_proto._frame import Frame  # noqa: E402

Trace = list[str]


def error_line(exc: BaseException) -> str:
    if isinstance(exc, ProtocolError):
        line = f"{type(exc).__name__}({exc.kind.name}, limit={exc.limit!r}, {exc.message!r})"
        hint = getattr(exc, "event_hint", None)
        return line if hint is None else f"{line} hint={hint!r}"
    return f"{type(exc).__name__}({exc})"


def attempt(trace: Trace, call: Callable[[], object]) -> bool:
    """Run ``call``; record what it returned or raised; True when it returned."""
    try:
        trace.append(repr(call()))
    except ProtocolError as exc:
        trace.append("raised " + error_line(exc))
        return False
    return True


def decode(case: Case, chunks: Iterable[bytes]) -> Trace:
    decoder = FrameDecoder(case.version, strict=case.strict, limits=case.limits)
    trace: Trace = []
    try:
        for chunk in [*chunks, None]:
            decoder.receive_data(chunk)
            while (frame := decoder.next_frame()) is not None:
                trace.append(repr(frame))
            trace.append(f"buffered={decoder.buffered}")
    except RemoteProtocolError as exc:
        trace.append("raised " + error_line(exc))
    return trace


def ended(trace: Trace, conn: ClientConnection | ServerConnection) -> None:
    trace.append(f"state={conn.state.name} dropped={conn.dropped} ended_by={conn.ended_by!r}")
    attempt(trace, conn.next_event)


def serve(case: Case, chunks: Iterable[bytes], *, session: bool) -> Trace:
    versions = ("1.0", "1.1", "1.2") if session or case.ack_mode != 3 else (case.version,)
    conn = ServerConnection(versions=versions, strict=case.strict, limits=case.limits)
    trace: Trace = []
    deliveries = 0
    try:
        for chunk in [*chunks, None]:
            conn.receive_data(chunk)
            while (event := conn.next_event()) is not None:
                trace.append(repr(event))
                message_id = f"m-{event.key}" if session and isinstance(event, Subscribe) else ""
                for reply in _server_replies(
                    conn, event, message_id or f"m{deliveries}", heartbeat=not session
                ):
                    deliveries += 1
                    attempt(trace, lambda reply=reply: conn.send(reply))  # type: ignore[misc]
    except RemoteProtocolError as exc:
        trace.append("raised " + error_line(exc))
        if exc.event_hint is not None:
            hint = exc.event_hint
            attempt(trace, lambda: conn.send(hint))
    ended(trace, conn)
    return trace


def consume(case: Case, chunks: Iterable[bytes], *, session: bool) -> Trace:
    version = case.version
    conn = ClientConnection(strict=case.strict, limits=case.limits)
    trace: Trace = []
    if session:
        trace.append(repr(conn.send(Connect(host="/", accept_versions=(version,)))))
    else:
        connect = Connect(host="/", accept_versions=(version,), heartbeat=(1000, 1000))
        trace.append(repr(conn.send(connect)))
        conn.receive_data(
            FrameEncoder("1.0").encode(
                Frame("CONNECTED", (("version", version), ("heart-beat", "1000,1000")))
            )
        )
        trace.append(repr(conn.next_event()))
        ack = ACK_MODES[case.ack_mode]
        if version == "1.0" and ack == "client-individual":
            ack = "client"
        for n, (ident, destination) in enumerate(CLIENT_SUBSCRIPTIONS):
            mode = ack if n == 0 else ACK_MODES[n]
            subscribe = Subscribe(destination, id=ident, ack=mode)  # type: ignore[arg-type]
            trace.append(repr(conn.send(subscribe)))
        for receipt in CLIENT_RECEIPTS:
            trace.append(repr(conn.send(Subscribe("/queue/r", id=receipt, receipt=receipt))))
    try:
        for chunk in [*chunks, None]:
            conn.receive_data(chunk)
            while (event := conn.next_event()) is not None:
                trace.append(repr(event))
                if session and isinstance(event, Connected):
                    _subscribe(conn, case)
                    trace.append(repr(sorted(conn.subscriptions)))
                elif _wants_ack(conn, event):
                    assert isinstance(event, Message)
                    attempt(trace, lambda event=event: conn.ack(event))  # type: ignore[misc]
            for now in (0.0, 0.4, 2.5):
                attempt(trace, lambda now=now: conn.handle_timer(now))  # type: ignore[misc]
    except RemoteProtocolError as exc:
        trace.append("raised " + error_line(exc))
    ended(trace, conn)
    return trace


def replay(target: str, data: bytes) -> Trace:
    """``data`` read as the fuzz target ``target`` reads it; the traces of each feeding."""
    case = Case.from_bytes(data)
    if target == "decoder":
        return decode(case, case.chunks())
    if target == "server":
        return serve(case, case.chunks(), session=False)
    if target == "client":
        return consume(case, case.chunks(), session=False)
    if target == "unbounded":
        # The differential script under limits past C's integers, on the build loaded:
        # the other process runs it on the other build.
        return run_script(stomp_proto, data, unbounded=True)
    rng = random.Random(data)
    recipe = data[2:]
    if target == "stream":
        stream = recipe_stream(recipe, case.version, data)
        feedings = [[stream], list(random_cuts(rng, stream))]
        return [line for chunks in feedings for line in decode(case, chunks)]
    script = client_script if target == "server_session" else server_script
    stream = script(recipe, case.version, data)
    feedings = [[stream], list(random_cuts(rng, stream))]
    run = serve if target == "server_session" else consume
    return [line for chunks in feedings for line in run(case, chunks, session=True)]


#: Streams shorter than this are fed in every split (--splits).
SPLIT_BELOW = 320


def every_split(target: str, data: bytes) -> str:
    """A digest of the traces of ``data``'s stream fed in every two-chunk split and
    byte by byte, with the number of feedings."""
    case = Case.from_bytes(data)
    stream = case.stream
    feedings = [[stream[:cut], stream[cut:]] for cut in range(1, len(stream))]
    feedings.append([stream[i : i + 1] for i in range(len(stream))])
    digest = hashlib.sha256()
    for chunks in feedings:
        if target == "decoder":
            trace = decode(case, chunks)
        elif target == "server":
            trace = serve(case, chunks, session=False)
        else:
            trace = consume(case, chunks, session=False)
        digest.update("\n".join(trace).encode("utf-8", "backslashreplace") + b"\0")
    return f"{len(feedings)} {digest.hexdigest()}"


def splits() -> None:
    print(stomp_proto.BUILD)
    for kind in ("corpus", "regressions"):
        for target in ("decoder", "client", "server"):
            for path in sorted((TESTS / "fuzzing" / kind / target).glob("*")):
                data = path.read_bytes()
                if len(Case.from_bytes(data).stream) < SPLIT_BELOW:
                    print(f"{kind}/{target}/{path.name}", every_split(target, data))


def main() -> None:
    if sys.argv[1:] == ["--splits"]:
        splits()
        return
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(stomp_proto.BUILD)
    for kind in ("corpus", "regressions"):
        for path in sorted((TESTS / "fuzzing" / kind).glob("*/*")):
            target = path.parent.name
            print(f"{kind}/{target}/{path.name}", replay(target, path.read_bytes()))
    seeds = random.Random(24)
    for n in range(sessions):
        for target in ("server_session", "client_session", "stream"):
            data = seeds.randbytes(seeds.randint(2, 64))
            print(f"session {n} {target}", replay(target, data))


if __name__ == "__main__":
    main()
