"""The HTML report: one page per run (failures first, contents, every case) and an index.

The pages are static and self-contained, made to be triaged in a minute, on
a phone too: a run's page opens with what FAILED (then what could not run,
then what is NON-STRICT), then the contents with per-group totals; each case
folds out to the clause it checks against what was observed, its duration
and its whole wire log.  ``index.html`` lists every run of the folder with
its totals and every case with its title; ``index.json`` says the same for
machines.
"""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path
from typing import Any

from ._case import GROUPS, LEVELS
from ._runner import Report

#: The verdicts in the order a reader wants them, with the short headings of narrow tables.
ORDER = ("FAILED", "NOT-RUN", "NON-STRICT", "OK", "INFORMATIONAL", "UNIMPLEMENTED")
_SHORT = {
    "FAILED": "FAIL",
    "NOT-RUN": "N/R",
    "NON-STRICT": "N-S",
    "OK": "OK",
    "INFORMATIONAL": "INFO",
    "UNIMPLEMENTED": "UNIMPL",
}
#: What the failures list shows, in this order.
TRIAGE = ("FAILED", "NOT-RUN", "NON-STRICT")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:0 auto;padding:.5em 1em;max-width:72em;
line-height:1.35}
h1{font-size:1.3em;margin:.3em 0}h2{font-size:1.1em;margin:1em 0 .3em}
.meta{color:#444;font-size:.9em;margin:.2em 0}
.warn{background:#fde2c8;padding:.4em;border-radius:4px}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.8em}
td,th{border:1px solid #ccc;padding:2px 3px;text-align:right}
td:first-child,th:first-child{text-align:left}
ul.triage{padding-left:0;list-style:none;margin:.2em 0}ul.triage li{margin:.15em 0}
.v{display:inline-block;min-width:6.5em;padding:0 .3em;border-radius:3px;font-size:.85em;
font-weight:600;text-align:center}
details{border-top:1px solid #eee;padding:.15em 0}summary{cursor:pointer}
dl{margin:.3em 0 .3em 1em}dt{font-weight:600;font-size:.85em;color:#555}dd{margin:0 0 .3em 1em}
q{font-style:italic}.remark{color:#555;font-size:.9em}
pre{background:#f6f6f6;padding:6px;overflow-x:auto;font-size:.8em;max-height:30em}
.OK{background:#c8f0c8}.NON-STRICT{background:#f6e7a6}.FAILED{background:#f4b0b0}
.INFORMATIONAL{background:#cfe3f7}.UNIMPLEMENTED{background:#ddd}.NOT-RUN{background:#e8c8f0}
"""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower() or "run"


def default_name(report: Report) -> str:
    """A run's name: the broker's server header and version (and a transport not TCP)."""
    broker = report.broker
    if broker.get("mode") == "client":
        return "client"
    name = broker.get("server") or f"broker-{broker['port']}"
    if broker.get("transport", "tcp") != "tcp":
        name += "-" + str(broker["transport"]).split(" ")[0]
    return _slug(name)


def _free_name(folder: Path, wanted: str) -> str:
    """``wanted``, or ``wanted-2``, ``wanted-3``... when a run of that name is there already."""
    name, number = wanted, 1
    while (folder / f"{name}.json").exists():
        number += 1
        name = f"{wanted}-{number}"
    return name


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1>{body}</body></html>\n"
    )


def _badge(verdict: str) -> str:
    return f"<span class='v {verdict}'>{verdict}</span>"


def _counts_table(rows: list[tuple[str, dict[str, int]]], first: str) -> str:
    head = "".join(f"<th title='{v}'>{_SHORT[v]}</th>" for v in ORDER)
    lines = [f"<div class='scroll'><table><tr><th>{first}</th><th>cases</th>{head}</tr>"]
    for label, counts in rows:
        cells = "".join(
            f"<td class='{v}'>{counts[v]}</td>" if counts.get(v) else "<td></td>" for v in ORDER
        )
        lines.append(f"<tr><td>{label}</td><td>{sum(counts.values())}</td>{cells}</tr>")
    lines.append("</table></div>")
    return "".join(lines)


def _legend() -> str:
    levels = "".join(
        f"<li><b>{escape(level)}</b>: {escape(meaning)}</li>" for level, meaning in LEVELS.items()
    )
    return (
        "<p class='meta'>"
        + ", ".join(f"{_SHORT[v]} = {v}" for v in ORDER if _SHORT[v] != v)
        + ".</p><p class='meta'>Each case's level is read from the words it quotes from "
        "the spec of its version:</p><ul class='meta'>" + levels + "</ul>"
    )


def _case_section(case: dict[str, Any]) -> str:
    verdict = case["verdict"]
    remark = f"<br><span class='remark'>{escape(case['remark'])}</span>" if case["remark"] else ""
    wire = "\n".join(case["wire"]) or "(nothing went over the wire)"
    return (
        f"<details id='{escape(case['id'])}'><summary>{_badge(verdict)} "
        f"<b>{escape(case['id'])}</b> {escape(case['title'])}</summary><dl>"
        f"<dt>Expected ({escape(case['level'])})</dt><dd>{escape(case['section'])}: "
        f"<q>{escape(case['clause'])}</q>{remark}</dd>"
        f"<dt>Observed</dt><dd>{escape(case['detail']) or '(as expected)'}</dd>"
        f"<dt>Duration</dt><dd>{case['duration']:.3f} s</dd>"
        f"<dt>Wire log</dt><dd><pre>{escape(wire)}</pre></dd></dl></details>"
    )


def render_run(data: dict[str, Any], name: str) -> str:
    """The page of one run, from its JSON report."""
    broker, cases, summary = data["broker"], data["cases"], data["summary"]
    where = f"{broker['host']}:{broker['port']} ({broker['transport']})"
    who = broker.get("server") or ("a client" if broker.get("mode") == "client" else "broker")
    parts = [
        f"<p class='meta'>{escape(who)} at {escape(where)}, STOMP {escape(broker['version'])} "
        f"offered; {summary['cases']} cases in {summary['duration']} s"
        + (f", {escape(data['started'])}" if data.get("started") else "")
        + ". <a href='index.html'>All runs</a></p>"
    ]
    if summary.get("incomplete"):
        parts.append(f"<p class='warn'>Incomplete run: {escape(summary['incomplete'])}.</p>")
    if summary.get("left_behind"):
        parts.append(f"<p class='meta'>Left on the broker: {escape(summary['left_behind'])}</p>")
    parts.append("<h2>Failures first</h2>")
    triage = [c for v in TRIAGE for c in cases if c["verdict"] == v]
    if triage:
        parts.append("<ul class='triage'>")
        parts += [
            f"<li>{_badge(c['verdict'])} <a href='#{escape(c['id'])}'>{escape(c['id'])}</a> "
            f"{escape(c['title'])}</li>"
            for c in triage
        ]
        parts.append("</ul>")
    else:
        parts.append("<p>No case FAILED, none is NON-STRICT, every case ran.</p>")
    groups = list(dict.fromkeys(c["group"] for c in cases))
    rows = [
        (
            f"<a href='#g-{group}'>{escape(GROUPS.get(group, group))}</a>",
            _count(c for c in cases if c["group"] == group),
        )
        for group in groups
    ]
    rows.append(("<b>all</b>", _count(cases)))
    parts += ["<h2>Contents</h2>", _counts_table(rows, "group"), _legend()]
    for group in groups:
        parts.append(f"<h2 id='g-{group}'>{escape(GROUPS.get(group, group))}</h2>")
        parts += [_case_section(c) for c in cases if c["group"] == group]
    return _page(f"STOMP check: {name}", "".join(parts))


def _count(cases: Any) -> dict[str, int]:
    counts = dict.fromkeys(ORDER, 0)
    for case in cases:
        counts[case["verdict"]] = counts.get(case["verdict"], 0) + 1
    return counts


def write_html(report: Report, directory: str | Path, name: str | None = None) -> Path:
    """Write this run's page and JSON into ``directory``; rebuild the index of all runs.

    ``name`` (default :func:`default_name`) names the files; a default name
    already taken gets a number, so no run replaces another unless named so.
    """
    from ._report import write_json

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    stem = _slug(name) if name else _free_name(folder, default_name(report))
    write_json(report, folder / f"{stem}.json")
    data = json.loads((folder / f"{stem}.json").read_text(encoding="utf-8"))
    page = folder / f"{stem}.html"
    page.write_text(render_run(data, stem), encoding="utf-8")
    write_index(folder)
    return page


def _runs(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    runs = []
    for path in sorted(folder.glob("*.json")):
        if path.name == "index.json":
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "cases" in data and "broker" in data:
            runs.append((path.stem, data))
    return runs


def write_index(folder: Path) -> None:
    """``index.html`` and ``index.json``: every run in ``folder``, its totals, every case."""
    runs = _runs(folder)
    (folder / "index.json").write_text(
        json.dumps(
            [
                {
                    "name": stem,
                    "page": f"{stem}.html",
                    "report": f"{stem}.json",
                    "broker": data["broker"],
                    "started": data.get("started", ""),
                    "summary": {k: v for k, v in data["summary"].items() if k != "groups"},
                }
                for stem, data in runs
            ],
            indent=1,
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    rows = [
        (
            f"<a href='{escape(stem)}.html'>{escape(stem)}</a><br><span class='meta'>"
            f"{escape(data['broker'].get('server') or '')} {escape(data.get('started', ''))}"
            "</span>",
            _count(data["cases"]),
        )
        for stem, data in runs
    ]
    parts = ["<h2>Runs</h2>", _counts_table(rows, "run"), _legend(), "<h2>Cases</h2>"]
    tables = [{c["id"]: c for c in data["cases"]} for _, data in runs]
    titles: dict[str, dict[str, str]] = {}
    for table in tables:
        for case_id, case in table.items():
            titles.setdefault(case["group"], {}).setdefault(case_id, case["title"])
    head = "".join(f"<th>{escape(stem)}</th>" for stem, _ in runs)
    parts.append(f"<div class='scroll'><table><tr><th>case</th>{head}</tr>")
    for group, cases in titles.items():
        parts.append(
            f"<tr><th colspan='{len(runs) + 1}'>{escape(GROUPS.get(group, group))}</th></tr>"
        )
        for case_id, title in cases.items():
            cells = []
            for (stem, _), table in zip(runs, tables, strict=True):
                found = table.get(case_id)
                verdict = found["verdict"] if found else ""
                cells.append(
                    f"<td class='{verdict}'><a href='{escape(stem)}.html#{escape(case_id)}'>"
                    f"{_SHORT[verdict]}</a></td>"
                    if found
                    else "<td></td>"
                )
            parts.append(
                f"<tr><td><b>{escape(case_id)}</b> {escape(title)}</td>{''.join(cells)}</tr>"
            )
    parts.append("</table></div>")
    (folder / "index.html").write_text(
        _page("STOMP check: runs side by side", "".join(parts)), encoding="utf-8"
    )
