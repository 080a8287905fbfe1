"""The command line: ``python -m stomp_proto`` (also installed as ``stomp-proto``).

    stomp-proto broker [--port 61613]              run the embedded broker
    stomp-proto broker --websocket /ws             ... with STOMP over WebSocket too
    stomp-proto broker --websocket /ws --allowed-origin http://localhost:8000
                                                   ... for web pages from there too
    stomp-proto broker --no-metrics                without GET /metrics on its port
    stomp-proto broker --heartbeat 5000,5000 --max-frame-size 1048576 --log-level debug
    stomp-proto send /queue/a hello world          one message per argument
    stomp-proto send /queue/a --file data.bin      the file as one message
    stomp-proto send /queue/a < lines.txt          one message per line of stdin
    stomp-proto listen /queue/a [--json]           print messages as they arrive
    stomp-proto listen /queue/a --timeout 5        ... ending (status 1) after 5 s without one
    stomp-proto listen /queue/a --websocket /ws    ... over WebSocket (send too)
    stomp-proto listen /queue/a --host 'failover:(stomp://h1,stomp://h2)'   a URL as --host
    stomp-proto demo                               broker, producer and consumer in one go
    stomp-proto check 127.0.0.1:61613 [--json F]   check a broker against the specs
    stomp-proto check-client --port 61630          play a broker, check a client
                                                   (both: stomp-check, when installed)

Exit codes: 0 success, 1 connection or broker failure (or nothing arrived
within ``listen --timeout``), 2 bad arguments, 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
import signal
import ssl
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, TextIO, cast

from . import __version__
from ._build import describe as describe_build
from ._client._errors import ClientError
from ._client._options import ClientOptions, ConnectOptions
from ._errors import ProtocolError
from ._events import ACK_MODES, AckMode, Message
from ._frame import Version
from ._limits import Limits
from .asyncio import AsyncClient, connect
from .broker._access import Permissions, load_permissions
from .broker._core import (
    DEFAULT_FAILED_LOGIN_RATE,
    DEFAULT_HEARTBEAT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_LOGIN,
    DEFAULT_MAX_DESTINATIONS,
    DEFAULT_MAX_MEMORY,
    DEFAULT_MAX_QUEUE_BYTES,
    DEFAULT_MAX_TRANSACTION_BYTES,
    DEFAULT_MAX_TRANSACTIONS,
    BrokerOptions,
)
from .broker._metrics import DEFAULT_TOP_DESTINATIONS

if TYPE_CHECKING:
    from .broker import Broker

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

#: Seconds allowed for connecting (and each receipt) when --timeout is not given.
DEFAULT_TIMEOUT = 30.0


class NothingArrived(Exception):
    """``listen --timeout``: no message came within the timeout."""


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, not {text!r}")
    return name, value


def _user(text: str) -> tuple[str, str]:
    name, sep, password = text.partition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME:PASSWORD, not {text!r}")
    return name, password


def _heartbeat(text: str) -> tuple[int, int]:
    send, sep, receive = text.partition(",")
    try:
        beats = (int(send), int(receive))
    except ValueError:
        beats = (-1, -1)
    if not sep or min(beats) < 0:
        raise argparse.ArgumentTypeError(f"expected SEND_MS,RECEIVE_MS, not {text!r}")
    return beats


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds (0 for none), not {text!r}")
    return value or None


def _rate(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a rate (0 for none), not {text!r}")
    return value or None


def _permissions(text: str) -> dict[str, Permissions]:
    try:
        return load_permissions(text)
    except (OSError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a count (0 or more), not {text!r}")
    return int(text)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
    return value


#: The broker's resource limits: (BrokerOptions key, default, what it bounds).
BROKER_LIMITS: tuple[tuple[str, int, str], ...] = (
    ("max_memory", DEFAULT_MAX_MEMORY,
     "bytes of messages held at most; from 80 %% of it publishers are not read from "
     "until consumers bring it down to 60 %%"),
    ("max_queue_bytes", DEFAULT_MAX_QUEUE_BYTES,
     "bytes of messages one queue or topic subscription holds at most"),
    ("max_transaction_bytes", DEFAULT_MAX_TRANSACTION_BYTES,
     "bytes of messages one transaction buffers at most"),
    ("max_destinations", DEFAULT_MAX_DESTINATIONS,
     "queues and subscribed topics kept at most"),
    ("max_transactions", DEFAULT_MAX_TRANSACTIONS,
     "transactions one session may have open at once"),
    ("max_connections", DEFAULT_MAX_CONNECTIONS,
     "client connections served at once; one more gets ERROR 'too many connections'"),
    ("max_connections_per_login", DEFAULT_MAX_CONNECTIONS_PER_LOGIN,
     "sessions one login may have open at once"),
)  # fmt: skip

#: The broker's --log-level choices, as the logging module names them.
LOG_LEVELS = ("debug", "info", "warning", "error")


def _websocket_path(text: str) -> str:
    from ._websocket import check_path

    try:
        return check_path(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _origin(text: str) -> str:
    from ._websocket import check_origin

    try:
        return check_origin(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: What --timeout covers for commands that do not say otherwise.
CONNECT_TIMEOUT_HELP = (
    "seconds allowed for connecting and for each answer awaited from the broker "
    "(a receipt) (default %(default)s)"
)


def _add_connection_options(
    parser: argparse.ArgumentParser,
    *,
    timeout_default: float | None = 30.0,
    timeout_help: str = CONNECT_TIMEOUT_HELP,
) -> None:
    group = parser.add_argument_group("connection")
    group.add_argument(
        "--host",
        help="broker host (default 127.0.0.1), or a connection URL such as "
        "stomp://user:pass@host:61613/vhost, ws://host:15674/ws or "
        "'failover:(stomp://h1,stomp://h2)?randomize=false' (then without the options it sets)",
    )
    group.add_argument("--port", type=int, help="broker port (default 61613)")
    group.add_argument("--login", help="user name")
    group.add_argument("--passcode", help="password")
    group.add_argument("--vhost", help="CONNECT host header (default /)")
    group.add_argument("--tls", action="store_true", help="connect with TLS (system CA store)")
    group.add_argument("--cafile", help="CA certificate to trust for --tls")
    group.add_argument(
        "--timeout", type=float, default=timeout_default, metavar="SECONDS", help=timeout_help
    )
    group.add_argument(
        "--websocket",
        type=_websocket_path,
        metavar="PATH",
        help="STOMP over WebSocket at this path, e.g. /ws (wss:// with --tls)",
    )


def _client_options(args: argparse.Namespace) -> ClientOptions:
    """The connect() options the arguments give (those left out keep the defaults,
    or what a URL in --host says)."""
    context = None
    if args.tls or args.cafile:
        context = ssl.create_default_context(cafile=args.cafile)
    options = ClientOptions(timeout=DEFAULT_TIMEOUT if args.timeout is None else args.timeout)
    if args.login is not None:
        options["login"] = args.login
    if args.passcode is not None:
        options["passcode"] = args.passcode
    if args.vhost is not None:
        options["vhost"] = args.vhost
    if context is not None:
        options["ssl"] = context
    if args.websocket is not None:
        options["websocket"] = args.websocket
    return options


def check_connection_arguments(args: argparse.Namespace) -> str | None:
    """Why the connection arguments cannot be used (a bad URL, or an option the URL
    already sets), or None."""
    try:
        ConnectOptions.build(args.host, args.port, _client_options(args))
    except (ValueError, TypeError) as exc:
        return str(exc)
    return None


class _VersionAction(argparse.Action):
    """``--version``: the version and which build runs (and why, when pure), on one line.

    argparse's own version action would wrap the line, and would ask which build
    runs on every start rather than when the option is given.
    """

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show the version and which build runs, then exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"{parser.prog} {__version__} ({describe_build()})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stomp-proto", description="STOMP 1.0/1.1/1.2 tools built on stomp_proto."
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    broker = commands.add_parser("broker", help="run the embedded broker")
    broker.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    broker.add_argument("--port", type=int, default=61613, help="port (default %(default)s)")
    broker.add_argument(
        "--user",
        type=_user,
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="require a login; repeat for more users",
    )
    broker.add_argument("--certfile", help="serve TLS with this certificate (PEM)")
    broker.add_argument("--keyfile", help="private key for --certfile")
    broker.add_argument(
        "--cafile",
        help="with --certfile: require a client certificate signed by these CAs (PEM), mutual TLS",
    )
    broker.add_argument(
        "--permissions",
        type=_permissions,
        metavar="FILE",
        help="what each login may send to and subscribe to: a TOML file of [login] tables "
        "with write and read patterns (regular expressions for whole destinations)",
    )
    broker.add_argument(
        "--failed-login-rate",
        type=_rate,
        default=DEFAULT_FAILED_LOGIN_RATE,
        metavar="PER_SECOND",
        help="failed logins a second one client address may go on making after 10; then "
        "its CONNECTs wait their turn; 0 for no limit (default %(default)s)",
    )
    broker.add_argument(
        "--websocket",
        type=_websocket_path,
        metavar="PATH",
        help="also serve STOMP over WebSocket at this path (e.g. /ws), on the same port",
    )
    broker.add_argument(
        "--allowed-origin",
        type=_origin,
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages of this origin (scheme://host[:port], '*' for any) use the "
        "WebSocket; repeat for more (by default only the broker's own origin, and clients "
        "that send no Origin, such as non-browser ones)",
    )
    broker.add_argument(
        "--no-metrics",
        dest="metrics",
        action="store_false",
        help="do not serve GET /metrics (Prometheus text format) on the broker's port",
    )
    broker.add_argument(
        "--metrics-token",
        metavar="TOKEN",
        help="serve GET /metrics only to requests with 'Authorization: Bearer TOKEN' (or, "
        "with --user, HTTP Basic with one of the users)",
    )
    broker.add_argument(
        "--metrics-destinations",
        type=_count,
        default=DEFAULT_TOP_DESTINATIONS,
        metavar="N",
        help="list the N deepest destinations one by one in GET /metrics, beside the totals; "
        "0 for every destination (default %(default)s)",
    )
    broker.add_argument(
        "--strict",
        action="store_true",
        help="refuse every client frame the STOMP specs forbid (by default the broker accepts "
        "what RabbitMQ and ActiveMQ accept, such as a CONNECT without 'host')",
    )
    broker.add_argument(
        "--heartbeat",
        type=_heartbeat,
        default=DEFAULT_HEARTBEAT,
        metavar="SEND_MS,RECEIVE_MS",
        help="heart-beats: the broker sends them as often as a client asks but not more often "
        "than every SEND_MS, and takes them as often as a client offers but not more often "
        "than every RECEIVE_MS; 0 for none (default {},{})".format(*DEFAULT_HEARTBEAT),
    )
    resources = broker.add_argument_group("resource limits (BrokerOptions)")
    for name, default, bounds in BROKER_LIMITS:
        resources.add_argument(
            "--" + name.replace("_", "-"),
            type=_positive,
            metavar="N",
            help=f"{bounds} (default {default})",
        )
    resources.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help="end a session whose client sends no heart-beats and that holds no subscription "
        "once no frame went either way for this long; 0 for never "
        f"(default {DEFAULT_IDLE_TIMEOUT:g})",
    )
    limits = broker.add_argument_group("limits on incoming frames (stomp_proto.Limits)")
    for field in dataclasses.fields(Limits):
        limits.add_argument(
            "--" + field.name.replace("_", "-"),
            type=_positive,
            metavar="N",
            help=f"Limits.{field.name} (default {field.default})",
        )
    broker.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="log to stderr from this level: info shows every refused or failed connection "
        "with its client and the reason (default %(default)s)",
    )

    send = commands.add_parser("send", help="send messages")
    send.add_argument("destination")
    send.add_argument("messages", nargs="*", help="message bodies (default: stdin lines)")
    send.add_argument("--file", help="send this file's bytes as one message")
    send.add_argument("--header", type=_header, action="append", default=[], metavar="NAME=VALUE")
    send.add_argument("--content-type", help="content-type header")
    send.add_argument("--receipt", action="store_true", help="wait for a receipt for each message")
    _add_connection_options(send)

    listen = commands.add_parser("listen", help="print messages from a destination")
    listen.add_argument("destination")
    listen.add_argument("--ack", choices=ACK_MODES, default="auto")
    listen.add_argument("--count", type=int, help="stop after this many messages")
    listen.add_argument("--headers", action="store_true", help="print headers too")
    listen.add_argument("--json", action="store_true", help="one JSON object per line")
    _add_connection_options(
        listen,
        timeout_default=None,
        timeout_help="seconds allowed for connecting, and then for each next message: when "
        "none arrives in time the command ends with exit status 1 (default: connect "
        f"within {DEFAULT_TIMEOUT:g} s, then wait for messages forever)",
    )

    demo = commands.add_parser("demo", help="broker, producer and consumer in one process")
    demo.add_argument("--messages", type=int, default=5000, help="(default %(default)s)")
    demo.add_argument("--size", type=int, default=100, help="body bytes (default %(default)s)")
    # The checker is the stomp-check distribution: main() hands these commands' arguments
    # to it whole; they are here for the list of commands.
    for name, what in CHECKER_COMMANDS.items():
        checker = commands.add_parser(name, help=f"{what} (needs stomp-check)", add_help=False)
        checker.add_argument("arguments", nargs=argparse.REMAINDER)
    return parser


#: The commands that the stomp-check distribution runs, with what they do.
CHECKER_COMMANDS = {
    "check": "check a running broker against the STOMP specs",
    "check-client": "play a broker and check a client running the echo script",
}
#: What ``check`` and ``check-client`` say when stomp-check is not installed.
CHECKER_MISSING = (
    "the conformance checker is the stomp-check distribution, which is not installed: "
    "pip install stomp-check (from a checkout of stomp-proto: pip install ./stomp-check)"
)


def _checker(command: str, arguments: Sequence[str], err: TextIO) -> int:
    """``check`` and ``check-client``, run by stomp-check (exit 2 when it is missing)."""
    try:
        import stomp_check
    except ImportError:
        print(f"stomp-proto {command}: {CHECKER_MISSING}", file=err)
        return EXIT_USAGE
    if command == "check":
        return stomp_check.check_command(arguments, prog="stomp-proto check")
    return stomp_check.client_command(arguments, prog="stomp-proto check-client")


# -- send ------------------------------------------------------------------------


def _bodies(args: argparse.Namespace, stdin: TextIO) -> Iterator[bytes]:
    if args.file:
        with open(args.file, "rb") as file:
            yield file.read()
    elif args.messages:
        for text in args.messages:
            yield text.encode("utf-8")
    else:
        for line in stdin:
            yield line.rstrip("\n").encode("utf-8")


class _Progress:
    """A rate line on stderr about once a second, for long sends."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.count = 0
        self.start = self.shown = time.monotonic()

    def tick(self) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.shown >= 1.0:
            rate = self.count / (now - self.start)
            print(f"sent {self.count} messages ({rate:,.0f}/s)", file=self.out, flush=True)
            self.shown = now


async def _send(args: argparse.Namespace, stdin: TextIO, err: TextIO) -> None:
    progress = _Progress(err)
    async with connect(args.host, args.port, **_client_options(args)) as client:
        for body in _bodies(args, stdin):
            await client.send(
                args.destination,
                body,
                content_type=args.content_type,
                headers=dict(args.header),
                receipt=args.receipt,
            )
            progress.tick()
    if progress.count >= 1000 or progress.shown != progress.start:
        print(f"sent {progress.count} messages", file=err)


# -- listen ----------------------------------------------------------------------


def _render(message: Message, args: argparse.Namespace, version: Version) -> str:
    # Every header as it came on the wire, typed ones (content-type, ...) included.
    headers = message.to_frame(version).headers
    if args.json:
        record: dict[str, object] = {
            "destination": message.destination,
            "message_id": message.message_id,
            "subscription": message.subscription,
            "headers": dict(headers),
        }
        try:
            record["body"] = message.body.decode("utf-8")
        except UnicodeDecodeError:
            record["body_base64"] = base64.b64encode(message.body).decode("ascii")
        return json.dumps(record, ensure_ascii=False)
    body = message.body.decode("utf-8", "replace")
    if not args.headers:
        return body
    lines = [f"{name}:{value}" for name, value in headers]
    return "\n".join([*lines, "", body, ""])


async def _listen(args: argparse.Namespace, out: TextIO) -> None:
    # With --count, "auto" would let the broker settle messages beyond the
    # count that this command never prints: acknowledge one by one instead.
    ack: AckMode = args.ack
    if args.count is not None and ack == "auto":
        ack = "client-individual"
    async with (
        connect(args.host, args.port, **_client_options(args)) as client,
        client.subscribe(args.destination, ack=ack) as messages,
    ):
        seen = 0
        while args.count is None or seen < args.count:
            try:
                message = await messages.get(timeout=args.timeout)
            except TimeoutError:
                expected = "" if args.count is None else f" of {args.count}"
                raise NothingArrived(
                    f"no message on {args.destination} within {args.timeout:g} s "
                    f"(received {seen}{expected})"
                ) from None
            if message is None:
                return
            print(_render(message, args, client.version or "1.2"), file=out, flush=True)
            if ack != "auto":
                await client.ack(message)
            seen += 1


# -- broker and demo -------------------------------------------------------------


def broker_limits(args: argparse.Namespace) -> Limits | None:
    """The Limits the broker options ask for; ``None`` (the defaults) when none does."""
    given = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(Limits)
        if getattr(args, field.name) is not None
    }
    return Limits(**given) if given else None


def broker_resource_limits(args: argparse.Namespace) -> BrokerOptions:
    """The BrokerOptions the resource-limit options give (the others keep their defaults)."""
    given = {name: getattr(args, name) for name, _, _ in BROKER_LIMITS}
    return cast("BrokerOptions", {name: value for name, value in given.items() if value})


def broker_tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The broker's TLS context from --certfile/--keyfile, and --cafile for client certificates."""
    if not args.certfile:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.certfile, args.keyfile)
    if args.cafile:
        context.load_verify_locations(cafile=args.cafile)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


async def _broker(args: argparse.Namespace, err: TextIO) -> None:

    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log = logging.getLogger("stomp_proto")
    log.addHandler(handler)
    log.setLevel(args.log_level.upper())
    try:
        await _serve_broker(args, err)
    finally:
        log.removeHandler(handler)


async def _serve_broker(args: argparse.Namespace, err: TextIO) -> None:
    from .broker import Broker

    context = broker_tls_context(args)
    options = broker_resource_limits(args)
    options["users"] = dict(args.user) or None
    options["strict"] = args.strict
    options["heartbeat"] = args.heartbeat
    options["idle_timeout"] = args.idle_timeout
    options["permissions"] = args.permissions
    options["failed_login_rate"] = args.failed_login_rate
    options["limits"] = broker_limits(args)
    async with Broker(
        args.host,
        args.port,
        ssl=context,
        websocket=args.websocket,
        allowed_origins=args.allowed_origin,
        metrics=args.metrics,
        metrics_token=args.metrics_token,
        metrics_destinations=args.metrics_destinations or None,
        **options,
    ) as broker:
        # The broker's own INFO line says where it listens; below INFO it is said here,
        # so that the line is printed once whatever the level.
        if not logging.getLogger("stomp_proto").isEnabledFor(logging.INFO):
            print(f"STOMP broker listening on {broker.listening_on}", file=err, flush=True)
        with _closed_on_sigterm(broker):
            await broker.serve_forever()


@contextlib.contextmanager
def _closed_on_sigterm(broker: Broker) -> Iterator[None]:
    """While inside, SIGTERM closes ``broker`` as SIGINT does (every client told why);
    ``serve_forever`` then returns, and the command exits 0: it was asked to stop."""
    loop = asyncio.get_running_loop()
    closing: list[asyncio.Task[None]] = []

    def on_sigterm() -> None:
        if not closing:
            logging.getLogger("stomp_proto.broker").info(
                "STOMP broker: SIGTERM: closing %d connection(s)", len(broker.core.sessions)
            )
            closing.append(loop.create_task(broker.close()))

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (NotImplementedError, AttributeError):  # no such signal handling (Windows)
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def _consume(client: AsyncClient, destination: str, count: int) -> AsyncIterator[float]:
    async with client.subscribe(destination, ack="client-individual") as messages:
        async for message in messages:
            sent_at = float(dict(message.headers)["x-sent-at"])
            await client.ack(message)
            yield time.perf_counter() - sent_at
            count -= 1
            if count == 0:
                return


async def _demo(args: argparse.Namespace, out: TextIO) -> None:
    from .broker import Broker

    destination = "/queue/demo"
    body = b"x" * args.size
    print(f"stomp_proto {__version__}, {describe_build()}", file=out)
    async with Broker("127.0.0.1", 0) as broker:
        print(f"embedded broker on 127.0.0.1:{broker.port}", file=out)
        async with (
            connect("127.0.0.1", broker.port) as producer,
            connect("127.0.0.1", broker.port) as consumer,
        ):
            latencies: list[float] = []

            async def consume() -> None:
                async for latency in _consume(consumer, destination, args.messages):
                    latencies.append(latency)

            started = time.perf_counter()
            task = asyncio.create_task(consume())
            await asyncio.sleep(0)
            for n in range(args.messages):
                headers = {"x-sent-at": repr(time.perf_counter()), "x-seq": str(n)}
                await producer.send(destination, body, headers=headers, receipt=n % 100 == 99)
            await task
            elapsed = time.perf_counter() - started
    latencies.sort()
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    print(
        f"STOMP {producer.version}: {len(latencies)} messages of {args.size} B, "
        f"client-individual acks",
        file=out,
    )
    print(f"rate: {len(latencies) / elapsed:,.0f} messages/s", file=out)
    print(f"round trip latency: p50 {p50:.2f} ms, p99 {p99:.2f} ms", file=out)


# -- entry point -----------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] and arguments[0] in CHECKER_COMMANDS:  # options of its own
        return _checker(arguments[0], arguments[1:], sys.stderr)
    parser = build_parser()
    args = parser.parse_args(arguments)
    out, err = sys.stdout, sys.stderr
    if args.command == "broker" and args.cafile and not args.certfile:
        parser.error("broker: --cafile needs --certfile")
    if hasattr(args, "tls"):  # a command that connects
        problem = check_connection_arguments(args)
        if problem is not None:
            parser.error(f"{args.command}: {problem}")  # exits with EXIT_USAGE
    runners = {
        "broker": lambda: _broker(args, err),
        "send": lambda: _send(args, sys.stdin, err),
        "listen": lambda: _listen(args, out),
        "demo": lambda: _demo(args, out),
    }
    try:
        asyncio.run(runners[args.command]())
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except NothingArrived as exc:
        print(f"stomp-proto {args.command}: {exc}", file=err)
        return EXIT_FAILED
    except (ClientError, ProtocolError, OSError, TimeoutError, ImportError) as exc:
        print(f"stomp-proto {args.command}: {type(exc).__name__}: {exc}", file=err)
        return EXIT_FAILED
    return EXIT_OK
