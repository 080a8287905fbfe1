"""The reports of a run: a terminal table, JSON and JUnit XML (HTML pages: ``_html``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO
from xml.etree import ElementTree

from ._case import GROUPS, LEVELS
from ._runner import Report

VERDICTS = ("OK", "NON-STRICT", "FAILED", "INFORMATIONAL", "UNIMPLEMENTED", "NOT-RUN")
_COLOURS = {
    "OK": "32",
    "NON-STRICT": "33",
    "FAILED": "31",
    "INFORMATIONAL": "36",
    "UNIMPLEMENTED": "90",
    "NOT-RUN": "35",
}


def _paint(text: str, verdict: str, colour: bool) -> str:
    return f"\x1b[{_COLOURS[verdict]}m{text}\x1b[0m" if colour and text.strip() != "0" else text


def print_table(report: Report, out: TextIO, *, colour: bool, verbose: bool = False) -> None:
    """Counts of verdicts per group, then every case that is not OK."""
    broker = report.broker
    out.write(
        f"{broker.get('server') or 'broker'} at {broker['host']}:{broker['port']} "
        f"({broker['transport']}): {len(report.results)} cases in "
        f"{report.duration:.1f} s\n\n"
    )
    widths = [36] + [max(len(v), 5) for v in VERDICTS]
    header = [f"{'group':<{widths[0]}}"] + [
        f"{v:>{w}}" for v, w in zip(VERDICTS, widths[1:], strict=True)
    ]
    out.write("  ".join(header) + "\n")
    summary = report.summary()["groups"]
    from ._client_mode import CLIENT_GROUPS

    for group, title in {**GROUPS, **CLIENT_GROUPS}.items():
        counts = summary.get(group)
        if not counts:
            continue
        cells = [f"{title:<{widths[0]}}"]
        for verdict, width in zip(VERDICTS, widths[1:], strict=True):
            cells.append(_paint(f"{counts.get(verdict, 0):>{width}}", verdict, colour))
        out.write("  ".join(cells) + "\n")
    total = report.counts()
    cells = [f"{'total':<{widths[0]}}"] + [
        _paint(f"{total.get(v, 0):>{w}}", v, colour)
        for v, w in zip(VERDICTS, widths[1:], strict=True)
    ]
    out.write("  ".join(cells) + "\n\n")
    if report.left_behind:
        out.write(f"left on the broker: {report.left_behind}\n\n")
    shown = ("FAILED", "NON-STRICT", "NOT-RUN") if not verbose else VERDICTS
    listed = False
    for result in report.results:
        verdict = str(result.verdict)
        if verdict in shown:
            listed = True
            out.write(
                f"{_paint(f'{verdict:<13}', verdict, colour)} {result.case.id:<28} "
                f"[{result.case.level}] {result.case.title} -- {result.detail}\n"
            )
    if listed:
        write_levels(out)


def write_levels(out: TextIO) -> None:
    """How the [level] of each case listed is read."""
    out.write("\nlevels, read from the words each case quotes from its version's spec:\n")
    for level, meaning in LEVELS.items():
        out.write(f"  {level:<9} {meaning}\n")


def write_json(report: Report, path: str | Path) -> None:
    Path(path).write_text(
        json.dumps(report.as_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def write_junit(report: Report, path: str | Path, *, strict: bool = False) -> None:
    """One testsuite per group; FAILED (and NON-STRICT under strict) are failures,
    NOT-RUN cases errors (as pytest keeps errors apart from failures)."""
    suites = ElementTree.Element("testsuites", name="stomp-proto check")
    by_group: dict[str, list[Any]] = {}
    for result in report.results:
        by_group.setdefault(result.case.group, []).append(result)
    for group, results in by_group.items():
        failures = [
            r
            for r in results
            if str(r.verdict) == "FAILED" or (strict and str(r.verdict) == "NON-STRICT")
        ]
        suite = ElementTree.SubElement(
            suites,
            "testsuite",
            name=group,
            tests=str(len(results)),
            failures=str(len(failures)),
            errors=str(sum(str(r.verdict) == "NOT-RUN" for r in results)),
            skipped=str(sum(str(r.verdict) == "UNIMPLEMENTED" for r in results)),
            time=f"{sum(r.duration for r in results):.3f}",
        )
        for result in results:
            testcase = ElementTree.SubElement(
                suite,
                "testcase",
                classname=f"stomp.{group}",
                name=result.case.id,
                time=f"{result.duration:.3f}",
            )
            verdict = str(result.verdict)
            message = f"{verdict}: {result.detail}"
            if result in failures:
                failure = ElementTree.SubElement(testcase, "failure", message=message, type=verdict)
                failure.text = f"{result.case.section}: {result.case.clause}\n\n" + "\n".join(
                    result.wire
                )
            elif verdict == "NOT-RUN":
                error = ElementTree.SubElement(testcase, "error", message=message, type=verdict)
                error.text = "\n".join(result.wire)
            elif verdict == "UNIMPLEMENTED":
                ElementTree.SubElement(testcase, "skipped", message=message)
            else:
                out = ElementTree.SubElement(testcase, "system-out")
                out.text = message
    ElementTree.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
