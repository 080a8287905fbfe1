"""The reports of a run: a terminal table, JSON, JUnit XML and static HTML pages."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any, TextIO
from xml.etree import ElementTree

from ._case import GROUPS
from ._runner import Report

VERDICTS = ("OK", "NON-STRICT", "FAILED", "INFORMATIONAL", "UNIMPLEMENTED")
_COLOURS = {
    "OK": "32",
    "NON-STRICT": "33",
    "FAILED": "31",
    "INFORMATIONAL": "36",
    "UNIMPLEMENTED": "90",
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
    shown = ("FAILED", "NON-STRICT") if not verbose else VERDICTS
    for result in report.results:
        verdict = str(result.verdict)
        if verdict in shown:
            out.write(
                f"{_paint(f'{verdict:<13}', verdict, colour)} {result.case.id:<28} "
                f"{result.case.title} -- {result.detail}\n"
            )


def write_json(report: Report, path: str | Path) -> None:
    Path(path).write_text(
        json.dumps(report.as_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def write_junit(report: Report, path: str | Path, *, strict: bool = False) -> None:
    """One testsuite per group; FAILED (and NON-STRICT under strict) are failures."""
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
            elif verdict == "UNIMPLEMENTED":
                ElementTree.SubElement(testcase, "skipped", message=message)
            else:
                out = ElementTree.SubElement(testcase, "system-out")
                out.text = message
    ElementTree.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


# -- HTML ----------------------------------------------------------------------------

_STYLE = """body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}pre{background:#f6f6f6;padding:6px;
overflow-x:auto;font-size:85%}.OK{background:#c8f0c8}.NON-STRICT{background:#f6e7a6}
.FAILED{background:#f4b0b0}.INFORMATIONAL{background:#cfe3f7}.UNIMPLEMENTED{background:#ddd}"""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower() or "run"


def run_name(report: Report) -> str:
    """A file name for a run: the broker's server header and port."""
    broker = report.broker
    return _slug(f"{broker.get('server') or 'broker'}-{broker['port']}-{broker['transport']}")


def _page(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title><style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        f"{body}</body></html>\n"
    )


def write_html(report: Report, directory: str | Path) -> Path:
    """Write this run's page and its JSON into ``directory``; rebuild the index of all runs."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    name = run_name(report)
    write_json(report, folder / f"{name}.json")
    parts = [
        "<p>",
        html.escape(json.dumps(report.broker)),
        "</p><p>",
        html.escape(json.dumps(report.summary()["verdicts"])),
        "</p>",
    ]
    for result in report.results:
        verdict = str(result.verdict)
        parts.append(
            f"<section id='{html.escape(result.case.id)}'><h3 class='{verdict}'>"
            f"{html.escape(result.case.id)} {verdict}</h3><p>{html.escape(result.case.title)}"
            f"</p><blockquote>{html.escape(result.case.section)} ({result.case.level}): "
            f"{html.escape(result.case.clause)}</blockquote><p>{html.escape(result.detail)}</p>"
            f"<pre>{html.escape(chr(10).join(result.wire))}</pre></section>"
        )
    page = folder / f"{name}.html"
    page.write_text(
        _page(f"STOMP check: {report.broker.get('server') or name}", "".join(parts)),
        encoding="utf-8",
    )
    write_index(folder)
    return page


def write_index(folder: Path) -> None:
    """index.html: every run's JSON in ``folder``, side by side, one row per case id."""
    runs = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "cases" in data:
            runs.append((path.stem, data))
    ids: list[str] = []
    verdicts: list[dict[str, dict[str, Any]]] = []
    for _, data in runs:
        table = {c["id"]: c for c in data["cases"]}
        verdicts.append(table)
        ids.extend(i for i in table if i not in ids)
    head = "".join(
        f"<th><a href='{html.escape(stem)}.html'>{html.escape(stem)}</a></th>" for stem, _ in runs
    )
    rows = []
    for case_id in ids:
        cells = []
        for (stem, _), table in zip(runs, verdicts, strict=True):
            found = table.get(case_id)
            if found is None:
                cells.append("<td></td>")
            else:
                verdict = found["verdict"]
                cells.append(
                    f"<td class='{verdict}' title='{html.escape(found['detail'])}'>"
                    f"<a href='{html.escape(stem)}.html#{html.escape(case_id)}'>"
                    f"{verdict}</a></td>"
                )
        rows.append(f"<tr><td>{html.escape(case_id)}</td>{''.join(cells)}</tr>")
    body = f"<table><tr><th>case</th>{head}</tr>{''.join(rows)}</table>"
    (folder / "index.html").write_text(
        _page("STOMP check: runs side by side", body), encoding="utf-8"
    )
