"""Every case of the checker is judged by the spec of the version in its id.

The STOMP specifications are committed under ``tests/specs/`` (copies of
stomp.github.io's pages, with their Creative Commons licence at the end of
each).  For every case, of the broker and of the client checker:

* the quoted clause is the words of the spec named in its section, verbatim
  (``[...]`` marks words left out), in a section that spec has;
* a MUST case quotes words with MUST or REQUIRED, a SHOULD case words with
  SHOULD or RECOMMENDED, a MAY case words with MAY or OPTIONAL (STOMP 1.0
  writes them in lower case); a STATED case quotes a rule stated as plain
  fact ("will be", "is", the grammar), which fails like a MUST;
* a case whose version does not state the rule (it quotes a newer version)
  can only be INFORMATIONAL: its level is UNSTATED, and its remark says why;
  so is a case that records what the broker did where the spec has no rule.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from stomp_check import Case, catalogue
from stomp_check._client_mode import CLIENT_CATALOGUE

SPECS = Path(__file__).resolve().parents[2] / "tests" / "specs"
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


#: The RFC 2119 words that give a level (STOMP 1.0 writes them in lower case).
KEYWORDS = {
    "MUST": r"\b(MUST|REQUIRED|SHALL)\b",
    "SHOULD": r"\b(SHOULD|RECOMMENDED)\b",
    "MAY": r"\b(MAY|OPTIONAL)\b",
}
#: The words of a rule stated as plain fact: a statement of behaviour or of the grammar.
STATEMENT = r"\b(will|is|are|do not|does not|means|starts with|followed by|can be|initiates)\b"
#: How the title of a case that only records what the broker did begins.
OBSERVATION = ("What ", "Whether ", "Which ", "How ")


def level_problem(case: Case) -> str | None:
    """Why ``case``'s level is not what its quoted clause says; None when it is."""
    version, _ = where(case)
    words = case.clause if version != "1.0" else case.clause.upper()
    if case.level in KEYWORDS:
        if not re.search(KEYWORDS[case.level], words):
            return f"{case.id}: {case.level}, but {case.section} does not say it: {words!r}"
    elif case.level == "STATED":
        if not re.search(STATEMENT, case.clause):
            return f"{case.id}: STATED, but {case.section} states no rule: {case.clause!r}"
    elif case.level == "UNSTATED":
        # A version that does not state the rule (the quote is a newer one's), a case
        # that records what the broker did, or a remark saying why no rule applies.
        observes = case.title.startswith(OBSERVATION)
        if version == case.version and not observes and not case.remark:
            return f"{case.id}: UNSTATED, with its own version's words and no reason"
    else:
        return f"{case.id}: unknown level {case.level!r}"
    return None


@pytest.mark.parametrize("case", EVERY_CASE, ids=case_ids(EVERY_CASE))
def test_level_is_in_the_clause(case: Case) -> None:
    """MUST, SHOULD and MAY only where the quote has the keyword; STATED where it states a rule."""
    problem = level_problem(case)
    assert problem is None, problem


def test_a_wrong_level_is_refused() -> None:
    """The check above refuses the gradings issue 54 found: a stated rule as MAY, a MAY
    rule as MUST, an observation as STATED without a statement."""
    from dataclasses import replace

    by_id = {c.id: c for c in EVERY_CASE}
    assert level_problem(replace(by_id["1.2/transactions/1"], level="MAY"))
    assert level_problem(replace(by_id["1.2/subscribe/2"], level="MAY"))
    assert level_problem(replace(by_id["1.2/frames/8"], level="SHOULD"))
    assert level_problem(replace(by_id["1.2/streams/1"], level="MUST"))
    assert level_problem(replace(by_id["1.2/transactions/1"], level="UNSTATED", title="x"))
    assert level_problem(replace(by_id["1.2/transactions/1"], level="REQUIRED"))
    assert level_problem(by_id["1.2/transactions/1"]) is None


@pytest.mark.parametrize("case", EVERY_CASE, ids=case_ids(EVERY_CASE))
def test_own_version_or_informational(case: Case) -> None:
    version, _ = where(case)
    if version == case.version:
        return
    assert version > case.version, f"{case.id} quotes an older spec, {case.section}"
    assert case.level == "UNSTATED", f"{case.id}: {case.level} by the words of {case.section}"
    assert f"STOMP {case.version} does not state this rule" in case.remark


def test_the_quoted_specs_are_committed_with_their_licence() -> None:
    for version, licence in (("1.0", "2.5"), ("1.1", "2.5"), ("1.2", "3.0")):
        assert f"Creative Commons Attribution v{licence}" in plain(spec(version)), version
