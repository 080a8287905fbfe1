"""Write the published benchmark tables from the results files, so every figure has one source.

    python benchmarks/summary.py            # rewrite docs/_generated/*.inc and README's block
    python benchmarks/summary.py --check    # exit 1 if any of them is out of date

It reads ``benchmarks/results/codec.json``, ``e2e.json``, ``broker.json``,
``spark-tasks.json``, ``celery.json`` and ``fanout.json`` (what ``scripts/bench.sh`` writes) and
writes the reST tables that ``docs/benchmarks.rst`` includes, plus the summary between the
``benchmark-summary`` markers in ``README.rst``.
Nothing here is typed by hand: run it after a benchmark run and commit what it wrote.
``tests/test_docs_pages.py`` runs ``--check``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
GENERATED = ROOT / "docs" / "_generated"
README = ROOT / "README.rst"
README_START = ".. benchmark-summary-start\n"
README_END = ".. benchmark-summary-end\n"

OUR_CLIENTS = ("asyncio", "uvloop", "trio", "threads", "bare")
PURE, COMPILED, ACCELERATED = "stomp_proto", "stomp_proto[mypyc]", "stomp_proto[accelerated]"
#: benchmarks/e2e.py --compiled names the second build's rows "asyncio[compiled]" ...
COMPILED_ROW = "[compiled]"
READ_SIZES = {1: "1 B", 1460: "1460 B", 65536: "64 KiB"}
#: How the README names an e2e row that is not simply "the <name> client".
_WHO = {"bare": "the bare ClientConnection loop", "uvloop": "the asyncio client on uvloop"}


def second_build(codec: dict[str, Any]) -> tuple[str, str]:
    """The codec rows' name of the build beside the pure one, and its column title.

    The accelerated build (the native fast path) since it replaced the mypyc build;
    results of earlier runs name the mypyc one.
    """
    if any(row["codec"] == ACCELERATED for row in codec["rows"]):
        return ACCELERATED, "accelerated"
    return COMPILED, "compiled (mypyc)"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / name).read_text(encoding="utf-8"))
    return data


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A reST list-table: real table markup that the theme can wrap and scroll."""
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in [header, *rows]:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return "\n".join(lines) + "\n"


def ratio(value: float) -> str:
    return f"{value:.2f}x"


def spread(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return ratio(low) if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}x"


def day(stamp: str) -> str:
    return stamp[:10]


# -- the codec -------------------------------------------------------------------------


def codec_ratio(codec: dict[str, Any], workload: str, read_size: int | None, build: str) -> float:
    for row in codec["ratios"]:
        if (row["workload"], row["read_size"], row["build"]) == (workload, read_size, build):
            key = (
                "time_vs_floor"
                if workload == "1m"
                else ("vs_fastest_escaping_peer" if row["group"] == "encode" else "vs_fastest_peer")
            )
            return float(row[key])
    raise KeyError(f"codec.json has no {workload} row for reads of {read_size} ({build})")


def codec_targets(codec: dict[str, Any]) -> str:
    rows = []
    for target in codec["targets"]:
        if target["build"] != PURE:
            continue
        compiled = next(
            t
            for t in codec["targets"]
            if t["build"] == second_build(codec)[0] and t["name"] == target["name"]
        )
        rows.append(
            [
                target["name"],
                target["goal"],
                f"{ratio(target['value'])} ({'met' if target['met'] else 'missed'})",
                f"{ratio(compiled['value'])} ({'met' if compiled['met'] else 'missed'})",
            ]
        )
    return table(["target", "goal", "pure Python", second_build(codec)[1]], rows)


# -- end to end ------------------------------------------------------------------------


def e2e_rows(e2e: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for row in e2e["rows"] if row["ok"]]


def against_stomppy(
    e2e: dict[str, Any], client: str, key: str, broker: str | None = None
) -> list[float]:
    """``key`` of ``client`` over stomp.py's, for every scenario both ran (on ``broker``
    only, when given)."""
    rows = e2e_rows(e2e)
    ratios = []
    for row in rows:
        if row["client"] != client or broker not in (None, row["broker"]):
            continue
        scenario = (row["broker"], row["size"], row["ack"])
        peer = [r for r in rows if r["client"] == "stomp.py" and
                (r["broker"], r["size"], r["ack"]) == scenario]  # fmt: skip
        if peer:
            ratios.append(row[key] / peer[0][key])
    return ratios


def size_label(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


def e2e_table(e2e: dict[str, Any]) -> str:
    rows = e2e_rows(e2e)
    out = []
    for row in rows:
        scenario = (row["broker"], row["size"], row["ack"])
        peer = next(
            (r for r in rows if r["client"] == "stomp.py" and
             (r["broker"], r["size"], r["ack"]) == scenario),
            None,
        )  # fmt: skip
        out.append(
            [
                row["broker"],
                size_label(row["size"]),
                row["ack"],
                row["client"],
                f"{row['msgs_per_s']:,.0f}",
                ratio(row["msgs_per_s"] / peer["msgs_per_s"]) if peer else "",
                f"{row['cpu_per_100k']:.1f}",
                ratio(row["cpu_per_100k"] / peer["cpu_per_100k"]) if peer else "",
                f"{row['p50_ms']:.2f} / {row['p99_ms']:.2f}",
                f"{row['broker_cpu_per_100k']:.1f}" if row.get("broker_cpu_per_100k") else "",
            ]
        )
    header = [
        "broker", "body", "ack", "client", "msg/s", "msg/s vs stomp.py", "client CPU s/100k",
        "CPU vs stomp.py", "latency p50 / p99 ms", "broker CPU s/100k",
    ]  # fmt: skip
    return table(header, out)


def broker_table(broker: dict[str, Any]) -> str:
    """The broker's throughput on the pure build, and beside it the accelerated build's
    when the run measured it (``broker.py --accelerated``)."""
    fast = {row["n"]: row for row in broker.get("throughput_accelerated", [])}
    header = ["producer and consumer connections", "msg/s", "broker CPU s/100k"]
    if fast:
        header += ["msg/s, accelerated", "broker CPU s/100k, accelerated"]
    rows = []
    for row in broker["throughput"]:
        cells = [str(row["n"]), f"{row['msgs_per_s']:,.0f}", f"{row['broker_cpu_per_100k']:.1f}"]
        if fast:
            other = fast[row["n"]]
            cells += [f"{other['msgs_per_s']:,.0f}", f"{other['broker_cpu_per_100k']:.1f}"]
        rows.append(cells)
    memory = broker["memory"]
    text = table(header, rows)
    text += (
        f"\nMemory: {memory['bytes_per_connection']:,.0f} B per idle connection "
        f"(traced; {memory['rss_bytes_per_connection']:,.0f} B of RSS), "
        f"{memory['bytes_per_message_100b']:,.0f} B per queued 100 B message, "
        f"{memory['bytes_per_message_4k']:,.0f} B per queued 4 KiB message.\n"
    )
    return text


# -- the compiled build's targets ------------------------------------------------------


def codec_speed(codec: dict[str, Any], workload: str, read_size: int, name: str) -> float:
    for row in codec["rows"]:
        if (row["group"], row["workload"], row["read_size"], row["codec"]) == (
            "decode",
            workload,
            read_size,
            name,
        ):
            return float(row["frames_per_s"])
    raise KeyError(f"codec.json has no {name} row for {workload} frames in {read_size} B reads")


def verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def row_target(label: str, values: Sequence[float], ok: Callable[[float], bool]) -> list[str]:
    """A target over every end-to-end row: the range, how many rows meet it, the verdict."""
    met = [ok(value) for value in values]
    return [label, f"{spread(values)} ({sum(met)} of {len(values)} rows)", verdict(all(met))]


def broker_and_spark_targets(broker: dict[str, Any], spark: dict[str, Any]) -> list[list[str]]:
    """The accelerated build's targets outside the clients: the embedded broker's CPU
    per message halved (every N of broker.py), one Spark read task's CPU per row a third
    of the pure build's."""
    rows = []
    if fast := {row["n"]: row for row in broker.get("throughput_accelerated", [])}:
        shares = [
            fast[row["n"]]["broker_cpu_per_100k"] / row["broker_cpu_per_100k"]
            for row in broker["throughput"]
        ]
        rows.append(row_target("embedded broker: CPU per message <= 0.5x the pure build's",
                               shares, lambda value: value <= 0.5))  # fmt: skip
    fast, pure = spark.get("accelerated"), spark.get("pure")
    if fast and pure and isinstance(fast[0], dict):
        # The read task runs at RabbitMQ's delivery rate on either build: its CPU per
        # row is what the build moves (benchmarks/spark.py --tasks).
        share = statistics.median(t["cpu_us_per_row"] for t in fast) / statistics.median(
            t["cpu_us_per_row"] for t in pure
        )
        rows.append([
            "one stomp-streams Spark read task: CPU per row <= 0.33x the pure build's",
            ratio(share),
            verdict(share <= 0.33),
        ])  # fmt: skip
    elif fast and pure:  # an older run: rows/s only
        gain = statistics.median(fast) / statistics.median(pure)
        rows.append([
            "one stomp-streams Spark read task: rows/s >= 3x the pure build's",
            ratio(gain),
            verdict(gain >= 3),
        ])  # fmt: skip
    return rows


def compiled_targets(
    codec: dict[str, Any],
    e2e: dict[str, Any],
    broker: dict[str, Any] | None = None,
    spark: dict[str, Any] | None = None,
) -> str:
    """The second build's targets, each against this run's figures: the accelerated
    build's, or for earlier results the mypyc build's (an earlier native build, compiled
    from the pure sources with mypyc)."""
    build, _ = second_build(codec)
    accelerated = build == ACCELERATED
    client_limit, bare_limit, decode_goal = (0.33, 0.2, 10) if accelerated else (0.5, 0.33, 5)
    rows = []
    for client, key, limit in [
        *(
            (client, "cpu_per_100k", client_limit)
            for client in ("asyncio", "uvloop", "trio", "threads")
        ),
        ("bare", "cpu_per_100k", bare_limit),
    ]:
        if cpu := against_stomppy(e2e, client + COMPILED_ROW, key):
            who = "bare ClientConnection loop" if client == "bare" else client
            label = f"{who}: client CPU per message <= {limit}x stomp.py's, every row"
            rows.append(row_target(label, cpu, lambda value, limit=limit: value <= limit))
    for where in sorted({row["broker"] for row in e2e_rows(e2e)}):
        # What no Python client can go under: the wake-ups and system calls alone.
        if floor := against_stomppy(e2e, "floor", "cpu_per_100k", where):
            under = sum(value <= client_limit for value in floor)
            rows.append([
                f"for reference, {where}: the floor (a socket that only finds each frame's "
                "end, no client) costs, in CPU per message over stomp.py's",
                f"{spread(floor)} ({under} of {len(floor)} rows <= {client_limit}x)",
                "(no target)",
            ])  # fmt: skip
    for client in () if accelerated else ("asyncio", "trio", "threads"):
        if speed := against_stomppy(e2e, client + COMPILED_ROW, "msgs_per_s"):
            label = f"{client}: messages/s >= 1.2x stomp.py's (see the broker CPU column)"
            rows.append(row_target(label, speed, lambda value: value >= 1.2))
    for read_size in (1460, 65536):
        value = codec_ratio(codec, "small", read_size, build)
        reads = READ_SIZES[read_size]
        rows.append([
            f"decode small frames, {reads} reads: >= {decode_goal}x the fastest peer",
            ratio(value),
            verdict(value >= decode_goal),
        ])  # fmt: skip
    one_byte = codec_speed(codec, "small", 1, build) / codec_speed(codec, "small", 1, "stomp.py")
    rows.append([
        "decode small frames, 1 B reads: >= 1x stomp.py",
        ratio(one_byte),
        verdict(one_byte >= 1),
    ])  # fmt: skip
    if accelerated:
        rows += broker_and_spark_targets(broker or {}, spark or {})
    title = "target (accelerated build)" if accelerated else "target (compiled build)"
    return table([title, "this run", "verdict"], rows)


# -- the summary -----------------------------------------------------------------------


def summary_rows(codec: dict[str, Any], e2e: dict[str, Any]) -> list[list[str]]:
    rows = []
    fast_build, fast_name = second_build(codec)
    for workload, read_size, what in [
        ("small", 1460, "Decode small frames, 1460 B reads: speed over the fastest peer"),
        ("small", 1, "Decode small frames, 1 B reads: speed over the fastest peer"),
        ("1m", 65536, "Decode 1 MiB bodies, 64 KiB reads: time over a bare scan (lower is better)"),
        ("send", None, "Encode SEND frames: speed over the fastest escaping peer"),
    ]:
        rows.append(
            [
                what,
                ratio(codec_ratio(codec, workload, read_size, PURE)),
                ratio(codec_ratio(codec, workload, read_size, fast_build)),
            ]
        )
    for client in OUR_CLIENTS:
        compiled = client + COMPILED_ROW
        if not against_stomppy(e2e, client, "msgs_per_s"):
            continue
        for key, what in [
            ("msgs_per_s", "messages/s over stomp.py's"),
            ("cpu_per_100k", "CPU per message over stomp.py's, lower is better"),
        ]:
            pure = against_stomppy(e2e, client, key)
            fast = against_stomppy(e2e, compiled, key)
            rows.append(
                [
                    f"End to end, {client}: {what} (median {ratio(statistics.median(pure))}"
                    + (f"; {fast_name} {ratio(statistics.median(fast))}" if fast else "")
                    + ")",
                    spread(pure),
                    spread(fast) if fast else "not measured",
                ]
            )
    return rows


def scenarios(e2e: dict[str, Any]) -> int:
    return len({(r["broker"], r["size"], r["ack"]) for r in e2e_rows(e2e)})


def summary(codec: dict[str, Any], e2e: dict[str, Any]) -> str:
    env = e2e["environment"]
    intro = (
        f"Codec measured on {day(codec['meta']['date'])}, end to end on {day(env['date'])}: "
        f"CPython {env['python']} on Linux, {env['cpus']} CPUs, stomp.py "
        f"{env['versions']['stomp.py']}.  End-to-end ranges cover {scenarios(e2e)} scenarios "
        "(the embedded broker and RabbitMQ, 100 B and 4 KiB bodies, auto and "
        "client-individual acknowledgements), medians of three runs each.\n\n"
    )
    columns = ["measure", "pure Python", second_build(codec)[1]]
    return intro + table(columns, summary_rows(codec, e2e))


def readme_block(codec: dict[str, Any], e2e: dict[str, Any]) -> str:
    env = e2e["environment"]
    fast_build, fast_name = second_build(codec)
    lines = [
        f"Measured on {day(codec['meta']['date'])} (codec) and {day(env['date'])} (end to end), "
        f"CPython {env['python']}, {env['cpus']} CPUs; ``docs/benchmarks.rst`` has the tables:",
        "",
        f"- decoding small frames: {ratio(codec_ratio(codec, 'small', 1460, PURE))} "
        "the speed of the fastest other Python STOMP codec "
        f"({ratio(codec_ratio(codec, 'small', 1460, fast_build))} "
        + ("accelerated);" if fast_build == ACCELERATED else "compiled with mypyc);"),
    ]
    for client in OUR_CLIENTS:
        speed = against_stomppy(e2e, client, "msgs_per_s")
        cpu = against_stomppy(e2e, client, "cpu_per_100k")
        fast = against_stomppy(e2e, client + COMPILED_ROW, "msgs_per_s")
        fast_cpu = against_stomppy(e2e, client + COMPILED_ROW, "cpu_per_100k")
        if speed:
            who = _WHO.get(client, f"the {client} client")
            lines.append(
                f"- end to end, {who}: {spread(speed)} stomp.py's messages/s, "
                f"at {spread(cpu)} its CPU per message"
                + (f" ({fast_name}: {spread(fast)}, at {spread(fast_cpu)})" if fast else "")
                + ";"
            )
    lines[-1] = lines[-1].rstrip(";") + "."
    return "\n".join(lines) + "\n"


# -- Celery and Kombu -------------------------------------------------------------------

#: The rows of the Celery table: (part, key, label, whether more is better).
_CELERY_ROWS = (
    ("kombu", "publish_per_s", "Kombu publish, messages/s", True),
    ("kombu", "consume_per_s", "Kombu consume (ack each), messages/s", True),
    ("celery", "tasks_per_s", "Celery tasks/s (prefork, 2 processes, ``rpc://``)", True),
    ("celery", "latency_p50_ms", "Celery task latency p50, ms", False),
    ("celery", "latency_p99_ms", "Celery task latency p99, ms", False),
    ("celery", "cpu_broker_s_per_1000", "RabbitMQ's CPU, s per 1,000 tasks", False),
    ("celery", "cpu_worker_s_per_1000", "the worker's CPU, s per 1,000 tasks", False),
    ("celery", "cpu_client_s_per_1000", "the client's CPU, s per 1,000 tasks", False),
)


def celery_table(celery: dict[str, Any]) -> str:
    """This transport beside pyamqp on one RabbitMQ, with the verdict on the targets:
    at least pyamqp's tasks/s, and no worse latency."""
    ours, theirs = celery["transports"]["stomp-proto-kombu"], celery["transports"]["pyamqp"]
    rows = []
    for part, key, label, more_is_better in _CELERY_ROWS:
        a, b = ours[part][key], theirs[part][key]
        better = a >= b if more_is_better else a <= b
        rows.append(
            [label, f"{a:,.2f}", f"{b:,.2f}", ratio(a / b) + ("" if better else " (worse)")]
        )
    met = {
        "tasks/s at least pyamqp's": ours["celery"]["tasks_per_s"]
        >= theirs["celery"]["tasks_per_s"],
        "latency no worse (p50 and p99)": all(
            ours["celery"][key] <= theirs["celery"][key]
            for key in ("latency_p50_ms", "latency_p99_ms")
        ),
    }
    header = (
        f"Medians of {celery['repeats']} alternating runs: {celery['messages']:,} Kombu "
        f"messages of 100 B, {celery['tasks']:,} tasks, {celery['paced_tasks']} tasks one at a "
        f"time for the latency; Python {celery['python']}"
    )
    load_average = celery.get("load_average")
    if load_average:
        # The machine's 1-minute load average as the run began and ended (``uptime``).
        header += (
            f"; load average {load_average[0]:.2f} at the start, {load_average[1]:.2f} at the end"
        )
    header += ".\n\n"
    targets = table(["target", "verdict"], [[name, verdict(ok)] for name, ok in met.items()])
    return (
        header + table(["measure", "stomp-proto-kombu", "pyamqp", "ratio"], rows) + "\n" + targets
    )


# -- WebSocket fan-out ---------------------------------------------------------------

_FANOUT_NAMES = {
    "asgi": "``StompApp`` (uvicorn)",
    "broker": "embedded broker",
    "rabbitmq": "RabbitMQ Web-STOMP",
}


def fanout_table(fanout: dict[str, Any]) -> str:
    """``benchmarks/fanout.py``: per server and N, deliveries/s beside RabbitMQ's, the
    latencies, the server's CPU per delivery and memory per idle session; the targets."""
    env, settings = fanout["environment"], fanout["settings"]
    runs = fanout["runs"]
    loads = [run["loadavg"][0] for run in runs]
    head = (
        f"Run of {day(env['date'])}: {env['cpus']} CPUs shared with other work (1-minute "
        f"load average {min(loads):.1f}-{max(loads):.1f} during the runs), "
        f"{settings['rounds']} round(s) per N, the servers in turn; medians of the rounds "
        f"that delivered every message.  Each run: a burst of "
        f"{settings['deliveries']:,} deliveries (at least {settings['min_messages']} "
        f"messages), then {settings['paced']} messages one at a time.\n\n"
    )
    header = [
        "server", "subscribers", "deliveries/s", "x RabbitMQ", "burst p50 / p99 ms",
        "one message p50 / p99 ms", "server CPU µs per delivery", "RSS per idle session",
    ]  # fmt: skip
    rows = []
    for row in fanout["rows"]:
        if not row["ok_runs"]:
            cells = ["failed: " + "; ".join(row["errors"])] + ["-"] * 5
        else:
            x = row["x_rabbitmq"]
            cells = [
                f"{row['deliveries_per_s']:,.0f}",
                "-" if x is None or row["target"] == "rabbitmq" else ratio(x),
                f"{row['burst_p50_ms']:,.0f} / {row['burst_p99_ms']:,.0f}",
                f"{row['paced_p50_ms']:,.0f} / {row['paced_p99_ms']:,.0f}",
                f"{row['server_cpu_us_per_delivery']:.1f}",
                f"{row['rss_per_session'] / 1024:,.1f} KiB",
            ]
        name = _FANOUT_NAMES[row["target"]]
        runs_note = "" if row["ok_runs"] == row["runs"] else f" ({row['ok_runs']} of {row['runs']})"
        rows.append([name + runs_note, f"{row['subscribers']:,}", *cells])
    labels = {
        "asgi_faster_than_rabbitmq_at_1000": "``StompApp``: more deliveries/s than RabbitMQ "
        "Web-STOMP at 1,000 subscribers",
        "asgi_holds_10000": "``StompApp``: 10,000 subscribers held, every message delivered",
    }
    verdicts = [
        [
            label,
            "not measured" if fanout["targets"][key] is None else verdict(fanout["targets"][key]),
        ]
        for key, label in labels.items()
    ]
    return head + table(header, rows) + "\n" + table(["target", "verdict"], verdicts)


def outputs() -> dict[Path, str]:
    codec, e2e, broker = load("codec.json"), load("e2e.json"), load("broker.json")
    spark = load("spark-tasks.json")
    note = ".. Written by benchmarks/summary.py from benchmarks/results/; do not edit.\n\n"
    generated = {
        GENERATED / "summary.inc": note + summary(codec, e2e),
        GENERATED / "codec-targets.inc": note + codec_targets(codec),
        GENERATED / "compiled-targets.inc": note + compiled_targets(codec, e2e, broker, spark),
        GENERATED / "e2e-results.inc": note + e2e_table(e2e),
        GENERATED / "broker-results.inc": note + broker_table(broker),
        GENERATED / "celery-results.inc": note + celery_table(load("celery.json")),
        GENERATED / "fanout-results.inc": note + fanout_table(load("fanout.json")),
    }
    readme = README.read_text(encoding="utf-8")
    start = readme.index(README_START) + len(README_START)
    end = readme.index(README_END)
    generated[README] = readme[:start] + "\n" + readme_block(codec, e2e) + "\n" + readme[end:]
    return generated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path.relative_to(ROOT))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("out of date (run python benchmarks/summary.py):", *stale, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
