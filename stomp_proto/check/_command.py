"""``python -m stomp_proto check``: the command line of the checker."""

from __future__ import annotations

import argparse
from typing import TextIO

from ._report import print_table, write_html, write_json, write_junit
from ._runner import run, select
from ._wire import Target, Unreachable

#: Exit statuses: no case FAILED; a case FAILED (or NON-STRICT under --strict); no connection.
EXIT_CLEAN, EXIT_FAILED, EXIT_UNREACHABLE = 0, 1, 2


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _patterns(text: str) -> list[str]:
    return [p for p in text.split(",") if p]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser("check", help="check a running broker against the STOMP specs")
    check.add_argument("address", type=_address, metavar="HOST:PORT")
    check.add_argument("--login", help="user name")
    check.add_argument("--passcode", help="password")
    check.add_argument("--vhost", help="CONNECT host header (default: the host)")
    check.add_argument("--tls", action="store_true", help="connect with TLS")
    check.add_argument("--cafile", help="CA certificate to trust for --tls")
    check.add_argument("--websocket", metavar="PATH", help="STOMP over WebSocket at this path")
    check.add_argument(
        "--version",
        dest="versions",
        default="all",
        choices=("1.0", "1.1", "1.2", "all"),
        help="STOMP version (default all)",
    )
    check.add_argument(
        "--cases",
        type=_patterns,
        default=[],
        metavar="PATTERN",
        help="only these cases: comma-separated ids with wildcards, or groups",
    )
    check.add_argument(
        "--exclude",
        type=_patterns,
        default=[],
        metavar="PATTERN",
        help="leave these cases out (same patterns)",
    )
    check.add_argument("--strict", action="store_true", help="NON-STRICT fails the run too")
    check.add_argument("--json", metavar="FILE", help="write the report as JSON")
    check.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    check.add_argument("--html", metavar="DIR", help="write HTML pages (and an index of runs)")
    check.add_argument(
        "--timeout",
        type=float,
        default=2.0,
        help="seconds to wait for each answer (default %(default)s)",
    )
    check.add_argument("--workers", type=int, default=12, help="cases run at once")
    check.add_argument("--verbose", action="store_true", help="list every case, not only misses")


def main(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    host, port = args.address
    target = Target(
        host,
        port,
        args.login,
        args.passcode,
        args.vhost,
        args.tls,
        args.cafile,
        args.websocket,
        args.timeout,
    )
    versions = ["1.0", "1.1", "1.2"] if args.versions == "all" else [args.versions]
    cases = select(versions, args.cases, args.exclude)  # type: ignore[arg-type]
    if not cases:
        err.write("no case matches --cases/--exclude\n")
        return EXIT_FAILED
    try:
        report = run(target, cases, workers=args.workers)
    except Unreachable as exc:
        err.write(f"stomp-proto check: {exc}\n")
        return EXIT_UNREACHABLE
    print_table(report, out, colour=out.isatty(), verbose=args.verbose)
    if args.json:
        write_json(report, args.json)
    if args.junit:
        write_junit(report, args.junit, strict=args.strict)
    if args.html:
        page = write_html(report, args.html)
        out.write(f"HTML report: {page}\n")
    return EXIT_FAILED if report.failed(strict=args.strict) else EXIT_CLEAN


__all__ = ["EXIT_CLEAN", "EXIT_FAILED", "EXIT_UNREACHABLE", "add_parser", "main"]
