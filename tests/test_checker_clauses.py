"""Every case of the checker is judged by the spec of the version in its id.

The STOMP specifications are committed under ``tests/specs/`` (copies of
stomp.github.io's pages, with their Creative Commons licence at the end of
each).  For every case, of the broker and of the client checker:

* the quoted clause is the words of the spec named in its section, verbatim
  (``[...]`` marks words left out), in a section that spec has;
* a MUST case quotes words with MUST or REQUIRED, a SHOULD case words with
  SHOULD or RECOMMENDED (STOMP 1.0 writes them in lower case);
* a case whose version does not state the rule (it quotes a newer version)
  can only be INFORMATIONAL: its level is MAY, and its remark says why.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from stomp_proto.check import Case, catalogue
from stomp_proto.check._client_mode import CLIENT_CATALOGUE

SPECS = Path(__file__).parent / "specs"
EVERY_CASE = [*catalogue(), *CLIENT_CATALOGUE]


def plain(text: str) -> str:
    """Markdown to the words a reader sees: links, code and emphasis marks gone, spaces one."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"(?<![\w\\])_([^_]+)_(?!\w)", r"\1", text)
    text = text.replace("`", "").replace("*", "").replace("\\!", "!")
    return " ".join(text.split())


@cache
def spec(version: str) -> str:
    return (SPECS / f"stomp-specification-{version}.md").read_text(encoding="utf-8")


@cache
def sections(version: str) -> frozenset[str]:
    """The section titles of a spec: markdown headings and 1.0's HTML ones."""
    titles = re.findall(r"^#+ *(.+?) *$", spec(version), re.MULTILINE)
    titles += re.findall(r"<h\d[^>]*>(.+?)</h\d>", spec(version))
    titles = [plain(t) for t in titles]
    # 1.0's opening part (CONNECT, CONNECTED, the frame) sits under its title.
    return frozenset(t.split(",")[0] for t in titles) | frozenset(titles)


def where(case: Case) -> tuple[str, str]:
    """``(version, section title)`` of a case's quote."""
    version, _, title = case.section.partition(" §")
    return version, title


def case_ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


@pytest.mark.parametrize("case", EVERY_CASE, ids=case_ids(EVERY_CASE))
def test_clause_is_the_specs_words(case: Case) -> None:
    version, title = where(case)
    assert title in sections(version), f"{case.section}: no such section in the {version} spec"
    text = plain(spec(version))
    for piece in case.clause.split("[...]"):
        assert plain(piece) in text, f"{case.id}: not in the {version} spec: {piece!r}"


@pytest.mark.parametrize("case", EVERY_CASE, ids=case_ids(EVERY_CASE))
def test_level_is_in_the_clause(case: Case) -> None:
    version, _ = where(case)
    words = case.clause if version != "1.0" else case.clause.upper()
    if case.level == "MUST":
        assert re.search(r"\b(MUST|REQUIRED|SHALL)\b", words), f"{case.id}: MUST not in {words!r}"
    elif case.level == "SHOULD":
        assert re.search(r"\b(SHOULD|RECOMMENDED)\b", words), f"{case.id}: SHOULD not in {words!r}"
    else:
        assert case.level == "MAY", case.level


@pytest.mark.parametrize("case", EVERY_CASE, ids=case_ids(EVERY_CASE))
def test_own_version_or_informational(case: Case) -> None:
    version, _ = where(case)
    if version == case.version:
        return
    assert version > case.version, f"{case.id} quotes an older spec, {case.section}"
    assert case.level == "MAY", f"{case.id}: {case.level} by the words of {case.section}"
    assert f"STOMP {case.version} does not state this rule" in case.remark


def test_the_quoted_specs_are_committed_with_their_licence() -> None:
    for version, licence in (("1.0", "2.5"), ("1.1", "2.5"), ("1.2", "3.0")):
        assert f"Creative Commons Attribution v{licence}" in plain(spec(version)), version
