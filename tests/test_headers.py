"""The head-text functions of ``stomp_proto._headers``, on their own.

The decoder tests cover them through ``FrameDecoder``; these pin down the
rules each function owns, and check :func:`unescape` against a reference
written the slow, obvious way (one sequence at a time, left to right).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stomp_proto import ErrorKind, LocalProtocolError
from stomp_proto._headers import (
    TOO_LONG,
    content_length,
    header_fields,
    header_pairs,
    unescape,
)

# 1.2 §Value Encoding: the defined sequences; 1.1 has all but \r.
_DEFINED_12 = {"\\\\": "\\", "\\n": "\n", "\\c": ":", "\\r": "\r"}


def reference_unescape(text: str, cr: bool, strict: bool) -> str:
    """Left to right: a backslash and the character after it form one sequence."""
    defined = dict(_DEFINED_12) if cr else {k: v for k, v in _DEFINED_12.items() if k != "\\r"}
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "\\":
            out.append(text[i])
            i += 1
            continue
        sequence = text[i : i + 2]
        if sequence in defined:
            out.append(defined[sequence])
        elif strict:
            raise LocalProtocolError(ErrorKind.BAD_ESCAPE, repr(sequence.rstrip("\0")))
        else:
            out.append(sequence)
        i += len(sequence)
    return "".join(out)


# Backslashes and what may follow them, the placeholder, the fields' separator.
_TEXT = st.text(alphabet="\\\\\\ncr:x\x01\0 ", max_size=24)


@given(_TEXT, st.booleans(), st.booleans())
def test_unescape_matches_the_reference(text: str, cr: bool, strict: bool) -> None:
    try:
        expected = reference_unescape(text, cr, strict)
    except LocalProtocolError as exc:
        with pytest.raises(LocalProtocolError) as raised:
            unescape(text, cr, strict)
        assert raised.value.kind is ErrorKind.BAD_ESCAPE
        # The same sequence is named: the first undefined one.
        assert exc.message in raised.value.message
    else:
        assert unescape(text, cr, strict) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\\\\nb", "a\\nb"),  # an escaped backslash, then a plain "n"
        ("\\\\\\n", "\\\n"),  # three backslashes: one escaped, one starting \n
        ("C\\c\\\\data", "C:\\data"),
        ("\x01\\\\\x01", "\x01\\\x01"),  # the placeholder itself is data
    ],
)
def test_unescape_reads_backslash_runs_left_to_right(text: str, expected: str) -> None:
    assert unescape(text, True, True) == expected


def test_unescape_names_a_lone_backslash_before_a_field_separator() -> None:
    with pytest.raises(LocalProtocolError, match=r"undefined escape sequence '\\\\'"):
        unescape("name\0value\\\0next\0x", True, True)


def test_1_1_has_no_cr_escape() -> None:
    # 1.1 §Value Encoding defines \n, \c and \\ only.
    assert unescape("a\\rb", False, False) == "a\\rb"
    with pytest.raises(LocalProtocolError, match="undefined escape"):
        unescape("a\\rb", False, True)


def test_header_fields_split_at_the_first_colon() -> None:
    block = "destination:/queue/a\nreply-to:tcp://host:61613"
    fields = header_fields(block, block.split("\n"), True)
    assert header_pairs(fields) == (("destination", "/queue/a"), ("reply-to", "tcp://host:61613"))


def test_header_fields_keep_or_trim_blanks() -> None:
    block = "a: x \nb:y\t"
    assert header_pairs(header_fields(block, block.split("\n"), True)) == (
        ("a", " x "),
        ("b", "y\t"),
    )
    assert header_pairs(header_fields(block, block.split("\n"), False)) == (("a", "x"), ("b", "y"))


@pytest.mark.parametrize("bad", ["no colon", ":empty name"])
def test_header_fields_refuse_a_line_without_a_name(bad: str) -> None:
    block = f"ok:1\n{bad}"
    with pytest.raises(LocalProtocolError) as raised:
        header_fields(block, block.split("\n"), True)
    assert raised.value.kind is ErrorKind.BAD_HEADER
    assert repr(bad) in raised.value.message


@pytest.mark.parametrize(
    ("block", "strict", "expected"),
    [
        ("destination:/q", True, -1),
        ("content-length:12\ncontent-length:99", True, 12),  # the first wins
        ("x-content-length:5\ncontent-length:7", True, 7),  # only at a line start
        ("content-length:007", True, 7),
        ("content-length: 7 ", False, 7),  # lenient: blanks around the digits
        ("content-length:" + "9" * 40, True, TOO_LONG),
        ("content-length:" + "0" * 40 + "5", True, 5),
    ],
)
def test_content_length(block: str, strict: bool, expected: int) -> None:
    assert content_length(block, strict) == expected


@pytest.mark.parametrize("value", ["", " 7", "-1", "7a", "\u0967"])  # U+0967: a Devanagari one
def test_content_length_refuses_anything_but_ascii_digits(value: str) -> None:
    with pytest.raises(LocalProtocolError) as raised:
        content_length(f"content-length:{value}", True)
    assert raised.value.kind is ErrorKind.BAD_CONTENT_LENGTH
