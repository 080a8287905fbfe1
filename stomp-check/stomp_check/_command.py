"""``stomp-check``: the command line of the checker (``python -m stomp_proto check`` too)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from stomp_proto import Version

from ._case import CATALOGUE, Case
from ._html import write_html
from ._report import print_table, write_json, write_junit
from ._runner import Report, run, select
from ._wire import Target, Unreachable

#: Exit statuses: no case FAILED; a case FAILED (or NON-STRICT under --strict); the run
#: could not be made or is incomplete (no connection, a case NOT-RUN, bad options).
EXIT_CLEAN, EXIT_FAILED, EXIT_UNREACHABLE = 0, 1, 2
#: Interrupted (Ctrl-C), as a shell reports SIGINT.
EXIT_INTERRUPTED = 130
#: ``--version`` -> the versions it checks.
VERSIONS: dict[str, tuple[Version, ...]] = {
    "1.0": ("1.0",),
    "1.1": ("1.1",),
    "1.2": ("1.2",),
    "all": ("1.0", "1.1", "1.2"),
}


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _patterns(text: str) -> list[str]:
    return [p for p in text.split(",") if p]


def _check_parser(prog: str) -> argparse.ArgumentParser:
    check = argparse.ArgumentParser(
        prog=prog,
        description="Check a running broker against the STOMP specs.",
        epilog="stomp-check client [--port 61630] ...: play a broker and check a client "
        "running the echo script (stomp-check client --help)",
    )
    check.add_argument("address", type=_address, metavar="HOST:PORT")
    check.add_argument("--login", help="user name")
    check.add_argument("--passcode", help="password")
    check.add_argument("--vhost", help="CONNECT host header (default: the host)")
    check.add_argument("--tls", action="store_true", help="connect with TLS")
    check.add_argument("--cafile", help="CA certificate to trust for --tls")
    check.add_argument("--websocket", metavar="PATH", help="STOMP over WebSocket at this path")
    _add_report_options(check)
    check.add_argument(
        "--prefix",
        default="/queue/stomp-check.",
        help="how the run's queues are named (default %(default)s)",
    )
    check.add_argument("--workers", type=int, default=12, help="cases run at once")
    return check


def _add_report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version",
        dest="versions",
        default="all",
        choices=("1.0", "1.1", "1.2", "all"),
        help="STOMP version (default all)",
    )
    parser.add_argument(
        "--cases",
        type=_patterns,
        default=[],
        metavar="PATTERN",
        help="only these cases: comma-separated ids with wildcards, or groups",
    )
    parser.add_argument(
        "--exclude",
        type=_patterns,
        default=[],
        metavar="PATTERN",
        help="leave these cases out (same patterns)",
    )
    parser.add_argument("--strict", action="store_true", help="NON-STRICT fails the run too")
    parser.add_argument("--json", metavar="FILE", help="write the report as JSON")
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    parser.add_argument("--html", metavar="DIR", help="write HTML pages (and an index of runs)")
    parser.add_argument(
        "--name",
        help="the run's name in the HTML report (default: the broker's server header and "
        "version, or the client's name)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=2.0,
        help="seconds to wait for each answer (default %(default)s)",
    )
    parser.add_argument("--verbose", action="store_true", help="list every case")


def _client_parser(prog: str) -> argparse.ArgumentParser:
    client = argparse.ArgumentParser(
        prog=prog, description="Play a broker and check a client running the echo script."
    )
    client.add_argument("--host", default="127.0.0.1", help="address to listen on")
    client.add_argument("--port", type=int, default=61630, help="port (default %(default)s)")
    client.add_argument(
        "--websocket", metavar="PATH", help="serve STOMP over WebSocket at this path"
    )
    client.add_argument(
        "--accept-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the client to (re)connect; then exit 2 (default %(default)s)",
    )
    _add_report_options(client)
    return client


def _write_reports(report: Report, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    print_table(report, out, colour=out.isatty(), verbose=args.verbose)
    try:
        if args.json:
            write_json(report, args.json)
        if args.junit:
            write_junit(report, args.junit, strict=args.strict)
        if args.html:
            page = write_html(report, args.html, name=args.name)
            out.write(f"HTML report: {page}\n")
    except OSError as exc:  # checked before the run; the disk can still fill or vanish
        err.write(f"{args.prog}: cannot write the report: {exc}\n")
        return EXIT_UNREACHABLE
    if report.incomplete or report.not_run():
        why = report.incomplete or f"{len(report.not_run())} cases could not run"
        err.write(f"{args.prog}: incomplete run: {why}\n")
        return EXIT_UNREACHABLE
    return EXIT_FAILED if report.failed(strict=args.strict) else EXIT_CLEAN


def _refusal(args: argparse.Namespace, catalogue: list[Case]) -> str:
    """Why the options cannot give a run ("" when they can): checked before any case runs."""
    for option, patterns in (("--cases", args.cases), ("--exclude", args.exclude)):
        unknown = [p for p in patterns if not select(VERSIONS["all"], [p], (), catalogue)]
        if unknown:
            groups = ", ".join(sorted({c.group for c in catalogue}, key=str))
            return (
                f"{option} {','.join(unknown)} matches no case; patterns are case ids with "
                f"wildcards (1.2/receipts/*) or groups: {groups}"
            )
    for option, path in (("--json", args.json), ("--junit", args.junit)):
        if path and (problem := _unwritable(Path(path), folder=False)):
            return f"{option} {path}: {problem}"
    if args.html and (problem := _unwritable(Path(args.html), folder=True)):
        return f"--html {args.html}: {problem}"
    return ""


def _unwritable(path: Path, *, folder: bool) -> str:
    """Why a report cannot be written at ``path`` ("" when it can)."""
    if folder and path.exists() and not path.is_dir():
        return "not a directory"
    if not folder and path.is_dir():
        return "is a directory"
    if not folder and not path.parent.is_dir():
        return f"no directory {path.parent}"
    existing = path if folder and path.exists() else path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    if not folder and path.exists() and not os.access(path, os.W_OK):
        return "not writable"
    return ""


def _client_main(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ._client_mode import CLIENT_CATALOGUE, serve_client_cases

    refusal = _refusal(args, CLIENT_CATALOGUE)
    if refusal:
        err.write(f"{args.prog}: {refusal}\n")
        return EXIT_UNREACHABLE
    cases = select(VERSIONS[args.versions], args.cases, args.exclude, CLIENT_CATALOGUE)
    if not cases:
        err.write(f"{args.prog}: no case of this --version matches --cases\n")
        return EXIT_UNREACHABLE

    def listening(port: int) -> None:
        err.write(
            f"check-client: listening on {args.host}:{port}, {len(cases)} cases; "
            "start the client's echo script\n"
        )
        err.flush()

    try:
        report = serve_client_cases(
            args.host,
            args.port,
            cases,
            timeout=args.timeout,
            accept_timeout=args.accept_timeout,
            on_listening=listening,
            websocket=args.websocket,
        )
    except OSError as exc:
        err.write(f"{args.prog}: {exc}\n")
        return EXIT_UNREACHABLE
    return _write_reports(report, args, out, err)


def _check_main(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
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
        args.prefix,
    )
    refusal = _refusal(args, CATALOGUE)
    if refusal:
        err.write(f"{args.prog}: {refusal}\n")
        return EXIT_UNREACHABLE
    cases = select(VERSIONS[args.versions], args.cases, args.exclude)
    if not cases:
        err.write(f"{args.prog}: no case of this --version matches --cases\n")
        return EXIT_UNREACHABLE
    try:
        report = run(target, cases, workers=args.workers)
    except Unreachable as exc:
        err.write(f"{args.prog}: {exc}\n")
        return EXIT_UNREACHABLE
    return _write_reports(report, args, out, err)


def check_command(argv: Sequence[str], prog: str = "stomp-check") -> int:
    """Check a broker as ``stomp-check HOST:PORT ARGS...`` does, ``argv`` being what
    follows the program's name; returns the exit status (2 for bad arguments)."""
    parser = _check_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or bad arguments
        return exc.code if isinstance(exc.code, int) else EXIT_UNREACHABLE
    args.prog = prog
    try:
        return _check_main(args, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def client_command(argv: Sequence[str], prog: str = "stomp-check client") -> int:
    """Play a broker and check a client, as ``stomp-check client ARGS...`` does."""
    parser = _client_parser(prog)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_UNREACHABLE
    args.prog = prog
    try:
        return _client_main(args, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    """The ``stomp-check`` program: ``client ARGS...`` checks a client, anything else a
    broker (``sys.argv[1:]`` when ``argv`` is None)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["client"]:
        return client_command(arguments[1:])
    return check_command(arguments)


__all__ = [
    "EXIT_CLEAN",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_UNREACHABLE",
    "check_command",
    "client_command",
    "main",
]
