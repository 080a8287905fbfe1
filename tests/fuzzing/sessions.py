"""Whole STOMP sessions for the deep fuzz harnesses, written by a recipe.

:func:`client_script` writes what a client sends over a whole session -
CONNECT (or STOMP), subscriptions, messages, transactions, acknowledgements of
the messages the harness's server delivered, unsubscriptions, DISCONNECT with
a receipt - and then more frames after the session is over.
:func:`server_script` writes the other side for a client that has subscribed:
CONNECTED, messages on its subscriptions (and on unknown ones), receipts,
ERROR, and frames after it.  Each step of the recipe may instead damage the
previous frame, repeat it many times, or insert a snippet (as in
:func:`fuzzing.streams.recipe_stream`), so the fuzzer reaches the deep states
of a session and the damage happens there.
"""

from __future__ import annotations

import random

from stomp_proto import FrameEncoder, Version
from stomp_proto._frame import Frame

from .streams import MAX_STREAM, SNIPPETS, mutate, repeats, valid_frame

#: The subscriptions a client script opens: (id, destination); the harness's
#: server delivers one MESSAGE per SUBSCRIBE, with message-id and ack "m-<id>".
SUB_IDS = ("s0", "s1", "s2", "s3")
ACK_MODES = ("auto", "client", "client-individual")


def _encode(
    version: Version, command: str, headers: list[tuple[str, str]], body: bytes = b""
) -> bytes:
    encoder = FrameEncoder("1.0" if command in ("CONNECT", "CONNECTED") else version)
    return encoder.encode(Frame(command, tuple(headers), body))


def _ack_headers(version: Version, sub: str) -> list[tuple[str, str]]:
    if version == "1.2":
        return [("id", f"m-{sub}")]
    if version == "1.1":
        return [("message-id", f"m-{sub}"), ("subscription", sub)]
    return [("message-id", f"m-{sub}")]


def client_script(recipe: bytes, version: Version, seed: bytes) -> bytes:
    """A client's side of a session, then data after its close."""
    rng = random.Random(seed)
    connect = [("accept-version", version), ("host", "/"), ("heart-beat", "0,0")]
    if version == "1.0":
        connect = [("login", "u")]
    command = "STOMP" if version != "1.0" and rng.random() < 0.2 else "CONNECT"
    pieces = [_encode(version, command, connect)]
    size = len(pieces[0])
    receipt = 0
    for step in recipe:
        action, arg = step % 16, step >> 4
        sub = SUB_IDS[arg % len(SUB_IDS)]
        tx = f"t{arg % 2}"
        extra: list[tuple[str, str]] = []
        if rng.random() < 0.2:
            receipt += 1
            extra = [("receipt", f"r{receipt}")]
        if action == 0:
            mode = ACK_MODES[arg % 3] if version != "1.0" else ACK_MODES[arg % 2]
            piece = _encode(
                version,
                "SUBSCRIBE",
                [("destination", f"/q/{sub}"), ("id", sub), ("ack", mode), *extra],
            )
        elif action in (1, 2):
            headers = [("destination", f"/q/{sub}"), *extra]
            if action == 2:
                headers.append(("transaction", tx))
            piece = _encode(
                version, "SEND", headers, rng.choice((b"", b"x", b"a\x00b", b"y" * 300))
            )
        elif action == 3:
            piece = _encode(version, "ACK", [*_ack_headers(version, sub), *extra])
        elif action == 4:
            piece = _encode(
                version,
                "NACK" if version != "1.0" else "ACK",
                [*_ack_headers(version, sub), *extra],
            )
        elif action == 5:
            piece = _encode(version, "BEGIN", [("transaction", tx), *extra])
        elif action == 6:
            piece = _encode(version, rng.choice(("COMMIT", "ABORT")), [("transaction", tx), *extra])
        elif action == 7:
            piece = _encode(version, "UNSUBSCRIBE", [("id", sub), *extra])
        elif action == 8:
            piece = _encode(version, "DISCONNECT", [("receipt", "bye")] if arg % 2 else [])
        else:
            piece = _shared_piece(action - 9, arg, pieces, size, rng, version, _CLIENT_EXTRA)
        if size + len(piece) > MAX_STREAM:
            break
        pieces.append(piece)
        size = sum(map(len, pieces))
    return b"".join(pieces)


#: The commands of the extra valid frames each side's script adds.
_CLIENT_EXTRA = ("SEND", "SUBSCRIBE", "ACK", "BEGIN")
_SERVER_EXTRA = ("MESSAGE", "RECEIPT", "ERROR")


def _shared_piece(
    kind: int,
    arg: int,
    pieces: list[bytes],
    size: int,
    rng: random.Random,
    version: Version,
    commands: tuple[str, ...],
) -> bytes:
    """The actions both scripts have, by ``kind``: 0 EOLs, 1 the last piece
    mutated (it is taken off), 2 the last piece repeated up to the size cap,
    3 a hostile snippet, anything else a valid frame of one of ``commands``."""
    if kind == 0:
        return b"\n" * (arg + 1)
    if kind == 1:
        return mutate(rng, pieces.pop(), arg % 4 + 1)
    if kind == 2:
        return pieces[-1] * min(
            repeats(arg * 2 + 1), max(0, MAX_STREAM - size) // max(len(pieces[-1]), 1)
        )
    if kind == 3:
        return SNIPPETS[arg % len(SNIPPETS)]
    return valid_frame(rng, version, rng.choice(commands))


def server_script(recipe: bytes, version: Version, seed: bytes) -> bytes:
    """A server's side of a session with a subscribed client, then data after its close."""
    rng = random.Random(seed)
    pieces = [_encode(version, "CONNECTED", [("version", version), ("heart-beat", "0,0")])]
    size = len(pieces[0])
    count = 0
    for step in recipe:
        action, arg = step % 16, step >> 4
        sub = SUB_IDS[arg % len(SUB_IDS)]
        if action in (0, 1, 2):
            count += 1
            headers = [
                ("destination", f"/q/{sub}"),
                ("message-id", f"m{count}"),
                ("subscription", sub if action != 2 else "unknown"),
            ]
            if version == "1.2":
                headers.append(("ack", f"a{count}"))
            piece = _encode(version, "MESSAGE", headers, rng.choice((b"", b"x", b"a\x00b")))
        elif action == 3:
            piece = _encode(version, "RECEIPT", [("receipt-id", f"r{arg % 4}")])
        elif action == 4:
            piece = _encode(version, "ERROR", [("message", "boom")], b"details")
        else:
            piece = _shared_piece(action - 5, arg, pieces, size, rng, version, _SERVER_EXTRA)
        if size + len(piece) > MAX_STREAM:
            break
        pieces.append(piece)
        size = sum(map(len, pieces))
    return b"".join(pieces)
