"""Hypothesis strategies for STOMP frames, streams and byte noise.

"Representable" follows the specs and the codec API:

* 1.1/1.2 frames other than CONNECT/CONNECTED escape ':' '\\' LF (and CR in 1.2), so their
  header names and values may hold any text but NUL; a 1.1 CR is plain data (1.1 §Augmented
  BNF), so it is representable too;
* 1.0 (no escapes) and CONNECT/CONNECTED (never escaped) cannot carry LF or CR, and their
  names cannot carry ':';
* STOMP is generated with the unescaped alphabet as well, which is representable whether or
  not the implementation escapes STOMP frames (that question has its own tests);
* only SEND, MESSAGE and ERROR carry bodies; a body with a NUL needs content-length.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hypothesis import strategies as st

from stomp_proto import Frame, HeartBeat, Version

VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")
BODY_COMMANDS = ("SEND", "MESSAGE", "ERROR")
UNESCAPED = ("CONNECT", "CONNECTED", "STOMP")
COMMANDS_10 = (
    "CONNECT", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK",
    "DISCONNECT", "CONNECTED", "MESSAGE", "RECEIPT", "ERROR",
)  # fmt: skip
COMMANDS_12 = (*COMMANDS_10, "STOMP", "NACK")

#: Characters that stress framing and escaping, mixed into generated text.
SPECIAL = (":", "\\", "\n", "\r", " ", "\t", "\u00e9", "\u65e5", "\U0001f600", "\x7f", "\x01")
COMMON_NAMES = ("destination", "id", "foo", "receipt", "message-id", "x")


@functools.cache
def text(exclude: str = "", *, min_size: int = 0, max_size: int = 12) -> st.SearchStrategy[str]:
    """Text without NUL, lone surrogates, or any character of ``exclude``."""
    specials = [c for c in SPECIAL if c not in exclude]
    chars = st.one_of(
        st.sampled_from(specials),
        st.characters(exclude_categories=("Cs",), exclude_characters="\x00" + exclude),
    )
    return st.text(chars, min_size=min_size, max_size=max_size)


def alphabet_for(version: Version, command: str) -> tuple[str, str]:
    """(characters excluded from names, characters excluded from values)."""
    if version == "1.0" or command in UNESCAPED:
        return ":\n\r", "\n\r"
    return "", ""


@functools.cache
def header_names(exclude: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(COMMON_NAMES), text(exclude, min_size=1)).filter(
        lambda n: n != "content-length"
    )


def headers_for(version: Version, command: str) -> st.SearchStrategy[tuple[tuple[str, str], ...]]:
    return _headers(*alphabet_for(version, command))


@functools.cache
def _headers(name_ex: str, value_ex: str) -> st.SearchStrategy[tuple[tuple[str, str], ...]]:
    pair = st.tuples(header_names(name_ex), text(value_ex))
    return st.lists(pair, max_size=6).map(tuple)


bodies = st.one_of(
    st.binary(max_size=48),
    st.lists(st.sampled_from([b"\x00", b"\n", b"\r\n", b"a", b"\\", b":"]), max_size=12).map(
        b"".join
    ),
)


@dataclass(frozen=True)
class Item:
    """One element of a generated stream: a frame (and how to encode it) or a heart-beat."""

    frame: Frame | HeartBeat
    content_length: bool = True


@st.composite
def frames(draw: st.DrawFn, version: Version) -> Item:
    command = draw(st.sampled_from(COMMANDS_10 if version == "1.0" else COMMANDS_12))
    headers = draw(headers_for(version, command))
    body = draw(bodies) if command in BODY_COMMANDS else b""
    content_length = True if b"\x00" in body else draw(st.booleans())
    return Item(Frame(command, headers, body), content_length)


@functools.cache
def streams(version: Version) -> st.SearchStrategy[list[Item]]:
    return st.lists(st.one_of(frames(version), st.just(Item(HeartBeat()))), max_size=8)


@st.composite
def unrepresentable(draw: st.DrawFn) -> tuple[Version, Frame, bool]:
    """A frame the encoder must refuse, with the version and content_length flag to use."""
    version: Version = draw(st.sampled_from(VERSIONS))
    case = draw(
        st.sampled_from(
            [
                "nul-name",
                "nul-value",
                "eol-unescaped",
                "colon-name-unescaped",
                "empty-name",
                "body-on-non-body",
                "nul-body-no-cl",
                "surrogate",
                "unknown-command",
            ]
        )
    )
    content_length = True
    if case == "eol-unescaped" or case == "colon-name-unescaped":
        # 1.0 frames, or CONNECT/CONNECTED in any version (not STOMP: see module doc).
        command = (
            draw(st.sampled_from(["CONNECT", "CONNECTED"]))
            if version != "1.0"
            else draw(st.sampled_from(COMMANDS_10))
        )
    elif case == "body-on-non-body":
        # 1.0 §SUBSCRIBE: its body "is ignored", so a 1.0 SUBSCRIBE may carry one.
        command = draw(
            st.sampled_from(
                [
                    c
                    for c in COMMANDS_12
                    if c not in BODY_COMMANDS and not (version == "1.0" and c == "SUBSCRIBE")
                ]
            )
        )
    elif case == "nul-body-no-cl":
        command = draw(st.sampled_from(BODY_COMMANDS))
    elif case == "unknown-command":
        command = draw(st.text(min_size=0, max_size=8).filter(lambda c: c not in COMMANDS_12))
    else:
        command = draw(st.sampled_from(COMMANDS_10 if version == "1.0" else COMMANDS_12))

    base_command = command if command in COMMANDS_12 else "SEND"
    headers = list(draw(headers_for(version, base_command)))
    body = b""
    prefix, suffix = draw(text("\n\r:")), draw(text("\n\r:"))
    if case == "nul-name":
        bad = (prefix + "\x00" + suffix, "v")
    elif case == "nul-value":
        bad = ("k", prefix + "\x00" + suffix)
    elif case == "eol-unescaped":
        # A CR is an ordinary octet in other 1.0 frames (1.0 §Augmented BNF).
        eol = draw(st.sampled_from(["\n", "\r"] if command in ("CONNECT", "CONNECTED") else ["\n"]))
        bad = draw(st.sampled_from([("k", prefix + eol + suffix), (prefix + "k" + eol, "v")]))
    elif case == "colon-name-unescaped":
        bad = (prefix + ":" + suffix, "v")
    elif case == "empty-name":
        bad = ("", draw(text("\n\r")))
    elif case == "surrogate":
        lone = draw(st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]))
        bad = draw(st.sampled_from([("k", prefix + lone), (lone + "k", "v")]))
    else:
        bad = None
    if bad is not None:
        headers.insert(draw(st.integers(0, len(headers))), bad)
    if case == "body-on-non-body":
        body = draw(st.binary(min_size=1, max_size=16))
    elif case == "nul-body-no-cl":
        body = draw(st.binary(max_size=8)) + b"\x00" + draw(st.binary(max_size=8))
        content_length = False
    return version, Frame(command, tuple(headers), body), content_length


# ------------------------------------------------------------------------------ decoder fuzzing

#: Valid frames and fragments to splice into noise.
SNIPPETS = (
    b"SEND\ndestination:/q\n\nhello\x00",
    b"MESSAGE\ncontent-length:5\n\nhe\x00lo\x00\n",
    b"CONNECTED\nversion:1.2\nsession:ID:a:1\n\n\x00",
    b"ERROR\r\nmessage:x\\cy\r\n\r\nbody\x00\r\n",
    b"SUBSCRIBE\nid:0\ndestination:/q\n\n\x00",
    b"\n", b"\r\n", b"\x00", b"\\", b":", b"\\c", b"\\r", b"\\t", b"content-length:",
    b"content-length:3\n", b"\n\n", b"send\n", b"\xc3", b"\xff", b" ",
)  # fmt: skip

noise = st.binary(max_size=24)
fuzz_streams = st.lists(st.one_of(st.sampled_from(SNIPPETS), noise), max_size=16).map(b"".join)


def chunkings(data: bytes) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(min_value=0, max_value=max(len(data), 1)), max_size=24)
