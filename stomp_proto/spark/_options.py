"""The data sources' options: parsed once, checked early, carried as picklable values.

Spark hands a data source its options as a case-insensitive ``str -> str``
mapping (keys lower-cased, every value a string), so each option is read by
its lower-cased name and converted here.  A bad value raises ``ValueError``
naming the option; the data sources parse options while Spark plans the
query, so a mistake fails the query before it starts.

Everything here is plain data: it travels to executors and to Spark's Python
runners by pickling, and the sockets and TLS contexts it describes are made
only where they are used.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import random
import socket
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from .._client._backoff import Backoff
from .._client._url import BrokerURL
from .._events import AckMode, Connect
from .._frame import VERSIONS, Version

__all__ = [
    "SPARK_OPTIONS",
    "CaptureSettings",
    "ConnectionSettings",
    "ReaderSettings",
    "WriterSettings",
    "option_names",
    "warn_once",
    "warn_unknown_options",
]

log = logging.getLogger("stomp_proto.spark")

#: Options that Spark itself sets or reads (``load(path)``, a stream's checkpoint),
#: never a mistake in a source's options.
SPARK_OPTIONS = frozenset({"path", "paths", "checkpointlocation", "queryname"})

OnError = Literal["row", "fail"]

#: SUBSCRIBE headers that set a subscription's in-flight limit, per broker family.
PREFETCH_COUNT = "prefetch-count"  # RabbitMQ, the embedded broker
ACTIVEMQ_PREFETCH = "activemq.prefetchSize"  # ActiveMQ Classic

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class _Options:
    """Typed reads of a ``str -> str`` options mapping whose keys are lower-cased."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._values = {str(k).lower(): str(v) for k, v in options.items()}

    def items(self) -> list[tuple[str, str]]:
        return list(self._values.items())

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self._values.get(name.lower())
        return default if value is None or value == "" else value

    def required(self, name: str) -> str:
        value = self.text(name)
        if value is None:
            raise ValueError(f"the {name!r} option is required (none was given)")
        return value

    def integer(self, name: str, default: int, minimum: int = 0) -> int:
        value = self.text(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"option {name!r} must be an integer, not {value!r}") from None
        if number < minimum:
            raise ValueError(f"option {name!r} must be an integer >= {minimum}, not {value!r}")
        return number

    def optional_integer(self, name: str, minimum: int = 0) -> int | None:
        return None if self.text(name) is None else self.integer(name, 0, minimum)

    def number(self, name: str, default: float, minimum: float = 0.0) -> float:
        value = self.text(name)
        if value is None:
            return default
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"option {name!r} must be a number, not {value!r}") from None
        if not number >= minimum:
            raise ValueError(f"option {name!r} must be a number >= {minimum:g}, not {value!r}")
        return number

    def flag(self, name: str, default: bool) -> bool:
        value = self.text(name)
        if value is None:
            return default
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        raise ValueError(f"option {name!r} must be true or false, not {value!r}")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self.text(name, default)
        assert value is not None
        if value not in choices:
            raise ValueError(f"option {name!r} must be one of {', '.join(choices)}, not {value!r}")
        return value

    def headers(self, name: str) -> dict[str, str]:
        """A JSON object of header names to values (names keep their case)."""
        value = self.text(name)
        if value is None:
            return {}
        form = 'a JSON object of header names to values, like {"priority": "9"}'
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"option {name!r} must be {form}, not {value!r} ({exc})") from None
        if not isinstance(parsed, dict):
            raise ValueError(f"option {name!r} must be {form}, not {value!r}")
        result: dict[str, str] = {}
        for key, item in parsed.items():
            if not isinstance(item, (str, int, float, bool)):
                raise ValueError(f"option {name!r}: header {key!r} must have a scalar value")
            result[str(key)] = str(item).lower() if isinstance(item, bool) else str(item)
        return result


@dataclass(frozen=True)
class ConnectionSettings:
    """Where the broker is and how to log in (options shared by the read and write sides)."""

    host: str = "127.0.0.1"
    port: int = 61613
    login: str | None = None
    #: Left out of the repr: settings get logged.
    passcode: str | None = field(default=None, repr=False)
    #: The CONNECT ``host`` header (RabbitMQ's virtual host).
    vhost: str = "/"
    tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_verify: bool = True
    #: Heart-beats asked for, in ms: (can send every, want every).
    heartbeat: tuple[int, int] = (10_000, 10_000)
    #: Seconds allowed for connecting and for each wait on a receipt.
    timeout: float = 30.0
    versions: tuple[Version, ...] = VERSIONS
    connect_headers: Mapping[str, str] = field(default_factory=dict)
    #: The brokers tried in turn when connecting (a failover ``url``); empty: ``(host, port)``.
    hosts: tuple[tuple[str, int], ...] = ()
    #: Try ``hosts`` in a random order.
    randomize: bool = False
    #: Seconds a call keeps retrying a broker that is down or restarting.
    retry_timeout: float = 60.0

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ConnectionSettings:
        read = _Options(options)
        url = read.text("url")
        if url is not None:
            return _from_url(cls, url, read)
        tls = read.flag("tls", read.flag("ssl", False))
        heartbeat = read.text("heartbeat", "10000,10000")
        assert heartbeat is not None
        first, comma, second = heartbeat.partition(",")
        if not (comma and first.strip().isdigit() and second.strip().isdigit()):
            raise ValueError(
                f"option 'heartbeat' must be two numbers of ms like '10000,10000', "
                f"not {heartbeat!r}"
            )
        versions_text = read.text("versions")
        versions = VERSIONS
        if versions_text is not None:
            wanted = {v.strip() for v in versions_text.split(",")}
            versions = tuple(v for v in VERSIONS if v in wanted)
            if not versions or len(versions) != len(wanted):
                raise ValueError(
                    f"option 'versions' must list STOMP versions out of 1.0,1.1,1.2, "
                    f"not {versions_text!r}"
                )
        return cls(
            host=read.text("host", "127.0.0.1") or "127.0.0.1",
            port=read.integer("port", 61613, minimum=1),
            login=read.text("login"),
            passcode=read.text("passcode"),
            vhost=read.text("vhost", "/") or "/",
            tls=tls,
            tls_ca_file=read.text("tlsCaFile"),
            tls_cert_file=read.text("tlsCertFile"),
            tls_key_file=read.text("tlsKeyFile"),
            tls_verify=read.flag("tlsVerify", True),
            heartbeat=(int(first), int(second)),
            timeout=read.number("timeout", 30.0, minimum=0.001),
            versions=versions,
            connect_headers=read.headers("connectHeaders"),
            retry_timeout=read.number("retryTimeout", 60.0),
        )

    @property
    def broker(self) -> str:
        """The broker's ``host:port`` (each of them, for a failover ``url``), for messages."""
        return ", ".join(f"{host}:{port}" for host, port in self.hosts or ((self.host, self.port),))

    def open_socket(self) -> socket.socket:
        """A connected socket to the broker (TLS when asked), Nagle off; blocking,
        with ``timeout`` as its timeout.

        With several ``hosts``, each is tried in turn (each with an equal share
        of the time left) until one connects; the OSError then names them all.
        """
        addresses = list(self.hosts or ((self.host, self.port),))
        if self.randomize:
            random.shuffle(addresses)
        deadline = time.monotonic() + self.timeout
        failures: list[str] = []
        for left, (host, port) in zip(range(len(addresses), 0, -1), addresses, strict=True):
            share = max(0.001, (deadline - time.monotonic()) / left)
            try:
                return self._open_one(host, port, share)
            except OSError as exc:
                if len(addresses) == 1:
                    raise
                failures.append(f"{host}:{port}: {exc or type(exc).__name__}")
        raise OSError(f"cannot connect to any of {len(addresses)} brokers: " + "; ".join(failures))

    def _open_one(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self.timeout)
            context = self.ssl_context()
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        return sock

    def connect_event(self, heartbeat: tuple[int, int] | None = None) -> Connect:
        """The CONNECT for these settings; ``heartbeat`` replaces theirs."""
        return Connect(
            host=self.vhost,
            accept_versions=self.versions,
            login=self.login,
            passcode=self.passcode,
            heartbeat=self.heartbeat if heartbeat is None else heartbeat,
            headers=tuple(self.connect_headers.items()),
        )

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client TLS context for these settings (made where it is used: it does not pickle)."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.tls_ca_file)
        if not self.tls_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.tls_cert_file is not None:
            context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        return context


#: Options a ``url`` sets; giving one of them as well is an error.
_URL_SETS = ("host", "port", "login", "passcode", "vhost", "tls", "ssl")


def _from_url(cls: type[ConnectionSettings], url: str, read: _Options) -> ConnectionSettings:
    """The settings of a ``url`` option (and the options it leaves to the others)."""
    try:
        parsed = BrokerURL.parse(url)
    except ValueError as exc:
        raise ValueError(f"option 'url': {exc}") from None
    for name in _URL_SETS:
        if read.text(name) is not None:
            raise ValueError(f"option {name!r} is given both by 'url' and on its own: give it once")
    if parsed.websocket is not None:
        raise ValueError("option 'url': the Spark source speaks STOMP over TCP, not WebSocket")
    if parsed.reconnect is not None and parsed.reconnect != Backoff():
        raise ValueError(
            "option 'url': the failover reconnect options have no meaning here "
            "(Spark retries a failed task, which connects anew); randomize does"
        )
    if parsed.connect_timeout is not None or parsed.failover_on_timeout is not None:
        raise ValueError(
            "option 'url': the failover options connectTimeout and failoverOnTimeout are "
            "the clients'; the Spark source's connections are bounded by its 'timeout'"
        )
    plain = cls.from_options({k: v for k, v in read.items() if k != "url"})
    host, port = parsed.hosts[0]
    return dataclasses.replace(
        plain,
        host=host,
        port=port,
        hosts=parsed.hosts,
        randomize=bool(parsed.randomize),
        login=parsed.login,
        passcode=parsed.passcode,
        vhost="/" if parsed.vhost is None else parsed.vhost,
        tls=parsed.tls,
    )


@dataclass(frozen=True)
class ReaderSettings:
    """The read side: what to subscribe to, how to acknowledge, how much to take at once."""

    destination: str
    ack: AckMode = "client"
    #: Most messages in one micro-batch (streaming) or one record batch (batch read).
    max_batch_size: int = 20_000
    #: In-flight limit asked of the broker; 0 for none, None to send no prefetch header.
    prefetch: int | None = 40_000
    subscribe_headers: Mapping[str, str] = field(default_factory=dict)
    subscription_id: str | None = None
    #: Batch read: stop once nothing arrived for this many seconds.
    idle_timeout: float = 1.0
    #: Batch read: stop after this many messages (over all partitions).
    max_messages: int | None = None
    #: Batch read: competing consumers, one per Spark partition.
    num_partitions: int = 1

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], *, streaming: bool, destination: str | None = None
    ) -> ReaderSettings:
        """The read options, checked; ``destination`` stands in for a missing one."""
        read = _Options(options)
        ack = read.choice("ackMode", "client", ("client", "client-individual", "auto"))
        batch = read.integer("maxBatchSize", 20_000, minimum=1)
        max_messages = read.optional_integer("maxMessages", minimum=1)
        prefetch_text = read.text("prefetch")
        prefetch: int | None
        if prefetch_text is not None and prefetch_text.lower() == "none":
            prefetch = None
        elif prefetch_text is not None:
            prefetch = read.integer("prefetch", 0)
        elif streaming:
            # Room for the batch Spark is processing and the next one.
            prefetch = 2 * batch
        else:
            # A batch read acknowledges at the end of its task, so the broker must
            # let every message of the drain be in flight at once.
            prefetch = max_messages or 0
        return cls(
            destination=read.text("destination", destination) or read.required("destination"),
            ack=ack,  # type: ignore[arg-type]
            max_batch_size=batch,
            prefetch=prefetch,
            subscribe_headers=read.headers("subscribeHeaders"),
            subscription_id=read.text("subscriptionId"),
            idle_timeout=read.number("idleTimeout", 1.0, minimum=0.0),
            max_messages=max_messages,
            num_partitions=read.integer("numPartitions", 1, minimum=1),
        )

    def subscription_headers(self) -> dict[str, str]:
        """The extra SUBSCRIBE headers: the prefetch ones, then the user's (which win)."""
        headers: dict[str, str] = {}
        if self.prefetch is not None and self.ack != "auto":
            headers[PREFETCH_COUNT] = str(self.prefetch)
            if self.prefetch > 0:
                # ActiveMQ reads 0 as "pull one at a time", not as "no limit".
                headers[ACTIVEMQ_PREFETCH] = str(self.prefetch)
        headers.update(self.subscribe_headers)
        return headers


@dataclass(frozen=True)
class WriterSettings:
    """The write side: where each row goes and which columns hold what."""

    destination: str | None = None
    destination_column: str = "destination"
    body_column: str = "body"
    headers_column: str = "headers"
    #: Headers added to every SEND (a row's own headers win).
    send_headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> WriterSettings:
        read = _Options(options)
        return cls(
            destination=read.text("destination"),
            destination_column=read.text("destinationColumn", "destination") or "destination",
            body_column=read.text("bodyColumn", "body") or "body",
            headers_column=read.text("headersColumn", "headers") or "headers",
            send_headers=read.headers("sendHeaders"),
        )


@dataclass(frozen=True)
class CaptureSettings:
    """The ``stomp-capture`` source: which files, which wire rules, what to do with bad bytes."""

    path: str
    #: "auto": 1.2 rules until a CONNECT or CONNECTED frame tells the version.
    version: Version | Literal["auto"] = "auto"
    on_error: OnError = "row"
    heartbeats: bool = False
    strict: bool = True
    recursive: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> CaptureSettings:
        read = _Options(options)
        path = read.text("path")
        if path is None:
            raise ValueError(
                "stomp-capture needs a path: spark.read.format('stomp-capture').load(path)"
            )
        return cls(
            path=path,
            version=read.choice("version", "auto", ("auto", *VERSIONS)),  # type: ignore[arg-type]
            on_error=read.choice("onError", "row", ("row", "fail")),  # type: ignore[arg-type]
            heartbeats=read.flag("includeHeartbeats", False),
            strict=read.flag("strict", True),
            recursive=read.flag("recursiveFileLookup", False),
        )


def option_names() -> dict[str, tuple[str, ...]]:
    """Every option each side reads (for the docs and tests)."""
    return {
        "connection": (
            "url", "host", "port", "login", "passcode", "vhost", "tls", "tlsCaFile", "tlsCertFile",
            "tlsKeyFile", "tlsVerify", "heartbeat", "timeout", "versions", "connectHeaders",
            "retryTimeout",
        ),
        "read": (
            "destination", "ackMode", "maxBatchSize", "prefetch", "subscribeHeaders",
            "subscriptionId", "idleTimeout", "maxMessages", "numPartitions",
        ),
        "write": ("destination", "destinationColumn", "bodyColumn", "headersColumn", "sendHeaders"),
        "capture": ("path", "version", "onError", "includeHeartbeats", "strict",
                    "recursiveFileLookup"),
    }  # fmt: skip


#: The warnings already logged by this process: Spark makes a data source, and checks its
#: options, several times for one query.
_WARNED: set[str] = set()


def warn_once(message: str, *args: object) -> None:
    """Log a WARNING on the ``stomp_proto.spark`` logger, unless this process already did."""
    text = message % args
    if text not in _WARNED:
        _WARNED.add(text)
        log.warning("%s", text)


def warn_unknown_options(
    source: str,
    options: Mapping[str, str],
    known: Iterable[str],
    explained: Mapping[str, str] | None = None,
) -> None:
    """Log a WARNING, once per process, for each option ``source`` does not read.

    Spark lower-cases option names, so they are compared without case; a
    misspelt option would otherwise be ignored in silence (as Kafka's source
    does).  An option of ``explained`` (lower-cased name -> what to do
    instead; Kafka's options, for the stream source) gets its explanation; any
    other gets the known name it is a likely misspelling of, if one is close
    enough that it can only mean the same.  Spark's own options never warn.
    """
    names = {name.lower(): name for name in known}
    notes = {k.lower(): v for k, v in (explained or {}).items()}
    for given in sorted(options):
        lowered = str(given).lower()
        if lowered in names or lowered in SPARK_OPTIONS:
            continue
        note = notes.get(lowered)
        if note is None and lowered.startswith("kafka."):
            note = notes.get("kafka.*")
        if note is not None:
            warn_once("%s: option %r is ignored: %s", source, given, note)
            continue
        near = difflib.get_close_matches(lowered, list(names), n=1, cutoff=0.8)
        hint = f"; did you mean {names[near[0]]!r}?" if near else ""
        warn_once("%s: unknown option %r is ignored%s", source, given, hint)
