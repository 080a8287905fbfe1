"""The documentation's pages speak to users, and their code runs as printed.

- No user-facing page (``docs/*.rst`` but the changelog, the benchmark methodology
  and the fuzzing log, and ``README.rst``) names an issue number or a commit hash:
  that history belongs in ``CHANGELOG.rst``.
- No paragraph runs over 120 words.
- Every Python code block is a complete program: it compiles as a module and uses no
  name it does not import or define (``ruff``'s undefined-name check), and a ``main``
  it defines is called.  Longer programs are ``literalinclude``\\ s of ``examples/``,
  which ``tests/test_examples.py`` runs.
- Every ``>>>`` fragment (a ``.. doctest::`` block of a page, a docstring's example)
  runs alone, as if pasted into a fresh interpreter: it imports what it uses.  Sphinx's
  doctest builder runs them too, with no global set-up (docs/conf.py sets none).
- The benchmark tables and README's figures are what ``benchmarks/summary.py`` writes
  from the results files.
"""

from __future__ import annotations

import doctest
import importlib
import io
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: Pages that keep the project's history, and may name issues and runs.
HISTORY_PAGES = {"changelog.rst", "benchmark-methodology.rst", "fuzzing-log.rst"}
MAX_WORDS = 120

PAGES = sorted(DOCS.glob("*.rst"))
USER_PAGES = [p for p in PAGES if p.name not in HISTORY_PAGES] + [ROOT / "README.rst"]

_ISSUE = re.compile(r"\b(?:issues?|stop)\s+#?\d+|#\d{1,4}\b", re.IGNORECASE)
# A commit hash: 7 to 40 hex digits with at least one letter and one digit, standing
# alone (not part of a longer word, a number with a unit, or a hex literal).
_HASH = re.compile(r"(?<![\w/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w/-])")


def prose_paragraphs(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each prose paragraph.

    Left out: titles, tables, and what follows a directive (``..``) or a ``::``
    while it is indented deeper than that line.  Kept: plain paragraphs, list items
    with their continuation lines (each item on its own), definitions and quotes.
    """
    paragraphs: list[tuple[int, str]] = []
    lines = text.splitlines()
    current: list[str] = []
    start = 0
    literal_indent: int | None = None  # inside a directive or literal block
    in_table = False
    previous_indent = 0

    def close() -> None:
        if current:
            paragraphs.append((start + 1, " ".join(current)))
            current.clear()

    for number, line in enumerate(lines):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            close()
            continue
        if literal_indent is not None:
            if indent > literal_indent:
                continue
            literal_indent = None
        if re.fullmatch(r"=+( +=+)+", stripped):  # a simple table's border
            close()
            following = lines[number + 1] if number + 1 < len(lines) else ""
            in_table = not (in_table and not following.strip())
            continue
        if in_table:
            continue
        if re.fullmatch(r"[-=~^\"'`#*+]{3,}", stripped):  # a title's underline
            if len(current) == 1:
                current.clear()  # the title is no paragraph
            close()
            continue
        if stripped.startswith(("..", "|", "+")):
            close()
            if stripped.startswith(".."):
                literal_indent = indent  # the directive's options and body follow
            continue
        new_item = re.match(r"([-*]|\d+\.|#\.)\s", stripped) is not None
        next_term = bool(current) and indent < previous_indent  # in a definition list
        if new_item or next_term:
            close()
        previous_indent = indent
        if not current:
            start = number
        current.append(stripped)
        if stripped.endswith("::"):
            close()
            literal_indent = indent
    close()
    return paragraphs


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each ``.. code-block:: python`` in a page."""
    return directive_blocks(text, r"code-block:: python3?")


def doctest_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, text) of each ``.. doctest::`` block in a page."""
    return directive_blocks(text, r"doctest::")


def directive_blocks(text: str, directive: str) -> list[tuple[int, str]]:
    """(line number, dedented body without options) of each ``.. <directive>``."""
    blocks = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if re.match(rf"\s*\.\. {directive}\s*$", line):
            indent = len(line) - len(line.lstrip())
            body = []
            for following in lines[number + 1 :]:
                if following.strip() and len(following) - len(following.lstrip()) <= indent:
                    break
                body.append(following)
            code = textwrap.dedent("\n".join(b for b in body if not b.strip().startswith(":")))
            blocks.append((number + 1, code.strip() + "\n"))
    return blocks


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: p.name)
def test_user_pages_name_no_issue_or_commit(page: Path) -> None:
    found = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        found += [f"{number}: {m.group()}" for m in _ISSUE.finditer(line)]
        found += [f"{number}: {m.group()}" for m in _HASH.finditer(line)]
    assert not found, f"{page.name} names project history: {found}"


@pytest.mark.parametrize("page", [p for p in PAGES if p.name != "changelog.rst"], ids=str)
def test_no_paragraph_runs_over_120_words(page: Path) -> None:
    long = [
        f"line {number}: {len(paragraph.split())} words"
        for number, paragraph in prose_paragraphs(page.read_text(encoding="utf-8"))
        if len(paragraph.split()) > MAX_WORDS
    ]
    assert not long, f"{page.name}: split these paragraphs: {long}"


def test_the_checks_see_what_they_look_for() -> None:
    """The detectors above find what they must, so that a pass means something."""
    assert _ISSUE.search("as issue 12 showed") and _ISSUE.search("see #34")
    assert _HASH.search("fixed in d6f3291.") and not _HASH.search("port 61613, 0x1f, abcdefg")
    paragraphs = prose_paragraphs(
        "Title\n=====\n\none two\nthree\n\n.. note::\n\n   x y\n\n"
        "==  ==\na   b\n==  ==\nc   d\n==  ==\n\nfour five\n\n"
        "* six\n  seven\n* eight\n\nterm\n    nine ten\nterm2\n    eleven\n"
    )
    assert paragraphs == [
        (4, "one two three"),
        (17, "four five"),
        (19, "* six seven"),
        (21, "* eight"),
        (23, "term nine ten"),
        (25, "term2 eleven"),
    ]
    assert python_blocks("Text\n\n.. code-block:: python\n\n   import a\n   a.b()\n\nEnd\n") == [
        (3, "import a\na.b()\n")
    ]


def _ruff() -> str:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (the dev extra has it)")
    return ruff


BLOCKS = [
    pytest.param(page, number, code, id=f"{page.name}:{number}")
    for page in [*PAGES, ROOT / "README.rst"]
    for number, code in python_blocks(page.read_text(encoding="utf-8"))
]


@pytest.mark.parametrize(("page", "line", "code"), BLOCKS)
def test_python_blocks_are_complete_programs(page: Path, line: int, code: str) -> None:
    where = f"{page.name} line {line}"
    compile(code, where, "exec")  # a SyntaxError (say, 'await' outside a function) fails
    result = subprocess.run(
        [_ruff(), "check", "--isolated", "--select", "F821,F822,F811", "--stdin-filename",
         "block.py", "-"],
        input=code, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, f"{where} uses names it does not define:\n{result.stdout}"
    if re.search(r"^(async )?def main\(", code, re.MULTILINE):
        assert re.search(r"^\S.*\bmain\(", code, re.MULTILINE), f"{where}: main() is never run"


#: Sphinx's doctest builder's default flags (``doctest_default_flags``).
DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL | doctest.DONT_ACCEPT_TRUE_FOR_1

FRAGMENTS = [
    pytest.param(page, number, text, id=f"{page.name}:{number}")
    for page in [*PAGES, ROOT / "README.rst"]
    for number, text in doctest_blocks(page.read_text(encoding="utf-8"))
]


def run_alone(test: doctest.DocTest) -> str:
    """Run ``test`` in its own fresh namespace; the report of its failures ("" if none)."""
    runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS)
    report = io.StringIO()
    runner.run(test, out=report.write, clear_globs=True)
    assert runner.tries > 0, f"{test.name}: no example found"
    return report.getvalue() if runner.failures else ""


@pytest.mark.parametrize(("page", "line", "text"), FRAGMENTS)
def test_doctest_fragments_run_alone(page: Path, line: int, text: str) -> None:
    """Each ``.. doctest::`` block, pasted into a fresh interpreter, runs as printed."""
    name = f"{page.name} line {line}"
    test = doctest.DocTestParser().get_doctest(text, {"__name__": "__main__"}, name, None, line)
    assert not (failed := run_alone(test)), f"{name} does not run alone:\n{failed}"


def test_docstring_examples_run_alone() -> None:
    """The ``>>>`` examples of the package's docstrings (autodoc puts them on the
    reference page) import what they use too."""
    checked = 0
    for path in sorted((ROOT / "stomp_proto").rglob("*.py")):
        if ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = importlib.import_module(".".join(p for p in parts if p != "__init__"))
        for test in doctest.DocTestFinder().find(module, globs={"__name__": "__main__"}):
            if test.examples:
                checked += 1
                assert not (failed := run_alone(test)), f"{test.name}:\n{failed}"
    assert checked > 0


def test_sphinx_has_no_global_doctest_setup() -> None:
    """A global set-up would hide a fragment's missing import from the doctest builder."""
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    assert not re.search(r"^doctest_global_setup\s*=", conf, re.MULTILINE)


def test_benchmark_figures_are_written_from_the_results() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "summary.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
