"""The Kombu transport: Kombu's virtual channel on stomp_proto's threads client.

Kombu's virtual transport gives the AMQP model (exchanges, bindings, QoS,
delivery tags) over a store of queues; here the store is the broker's STOMP
queues, ``/queue/<name>``, and every exchange that must reach other processes
(fanout, topic, and a direct one whose binding the publisher does not know) is
the topic ``/topic/<name>``.  :mod:`._feeds` holds what the broker pushed until
Kombu asks for it.

One Kombu connection is one STOMP connection (:func:`stomp_proto.threads.connect`,
no reconnects of its own: a lost connection is a connection error, and Kombu
or Celery connects again, as with every Kombu transport).  What was delivered
and not acknowledged then comes back from the broker.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from queue import Empty
from typing import Any

from kombu.transport import virtual
from kombu.transport.base import to_rabbitmq_queue_arguments

import stomp_proto
from stomp_proto.threads import ClientError, ClientState

from ._feeds import Feeds
from ._mapping import queue_headers, send_headers, wire_body

__all__ = ["Channel", "QoS", "Transport"]

DEFAULT_PORT = 61613

#: transport_options this transport reads, with their defaults.
OPTIONS: dict[str, Any] = {
    # Messages the broker may push to a consuming queue before any is
    # acknowledged, when the channel's basic_qos gave no prefetch_count.
    "prefetch_count": 100,
    # Seconds basic_get() waits for the broker to push a message (STOMP has no
    # "get": the queue is subscribed to and the first message taken).
    "get_wait": 1.0,
    "queue_prefix": "/queue/",
    "topic_prefix": "/topic/",
    # SEND with a receipt: publish returns once the broker has the message.
    "confirm_publish": False,
    # Passed to stomp_proto's connect(): the STOMP versions to offer, and
    # heart-beats as (can send every ms, want every ms) when Kombu's heartbeat
    # argument is not given.
    "versions": ("1.2", "1.1"),
    "heartbeat": (10_000, 10_000),
}
#: transport_options Kombu itself (or Celery) reads: accepted, not used here.
KOMBU_OPTIONS = frozenset(
    {
        "max_retries",
        "interval_start",
        "interval_step",
        "interval_max",
        "polling_interval",
        "body_encoding",
        "deadletter_queue",
        "client_properties",
        "connect_retries_timeout",
    }
)


def _checked_options(options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(OPTIONS) - KOMBU_OPTIONS)
    if unknown:
        raise ValueError(
            f"stomp_proto_kombu: unknown transport option(s) {', '.join(map(repr, unknown))}; "
            f"it takes {', '.join(sorted(OPTIONS))} (and Kombu's own "
            f"{', '.join(sorted(KOMBU_OPTIONS))})"
        )
    return {**OPTIONS, **{k: v for k, v in options.items() if k in OPTIONS}}


class QoS(virtual.QoS):  # type: ignore[misc]
    """Kombu's prefetch accounting; ack and reject settle the STOMP message.

    Nothing is restored by publishing again: the broker delivers what was not
    acknowledged once the subscription or the connection ends.
    """

    restore_at_shutdown = False

    def ack(self, delivery_tag: str) -> None:
        self.channel.feeds.settle(delivery_tag, ack=True)
        super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self.channel.feeds.settle(delivery_tag, ack=False, requeue=requeue)
        self._quick_ack(delivery_tag)

    def restore_unacked(self) -> list[Any]:
        self._delivered.clear()
        return []


class Channel(virtual.Channel):  # type: ignore[misc]
    """A Kombu channel: queues are STOMP queues, exchanges reach other processes
    through STOMP topics."""

    QoS = QoS
    supports_fanout = True
    do_restore = False
    #: Kombu's priorities are AMQP's and STOMP's: higher first, 0 to 9.
    max_priority = 9

    def __init__(self, connection: Transport, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self.feeds: Feeds = connection.feeds
        self.options: dict[str, Any] = connection.options

    # -- queues ----------------------------------------------------------------

    def prepare_queue_arguments(self, arguments: Mapping[str, Any], **kwargs: Any) -> Any:
        """A queue's ``max_priority``, ``expires``, ``message_ttl`` and ``max_length`` as
        RabbitMQ's ``x-*`` arguments: they go with the queue's SEND and SUBSCRIBE
        frames, and RabbitMQ declares the queue with them."""
        return to_rabbitmq_queue_arguments(arguments, **kwargs)

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        arguments = kwargs.get("arguments") or {}
        if arguments:
            self.connection.queue_arguments[queue] = dict(arguments)

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return True  # STOMP cannot ask; a broker makes a queue on first use

    def _size(self, queue: str) -> int:
        return 0  # STOMP has no way to count a queue's messages

    def _purge(self, queue: str) -> int:
        """Take and acknowledge what the broker delivers of ``queue`` until it
        pauses for ``get_wait`` seconds; the count of messages removed."""
        removed = 0
        while True:
            try:
                envelope = self._get(queue)
            except Empty:
                return removed
            self.feeds.settle(envelope["properties"]["delivery_tag"], ack=True)
            removed += 1

    def _delete(self, queue: str, *args: Any, **kwargs: Any) -> None:
        self.feeds.cancel(queue)
        self.feeds.unbind(queue)
        self.connection.queue_arguments.pop(queue, None)

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        self._send(
            self.feeds.queue_destination(queue),
            message,
            self.connection.queue_arguments.get(queue),
        )

    def _put_fanout(
        self, exchange: str, message: dict[str, Any], routing_key: str, **kwargs: Any
    ) -> None:
        self._send(self.feeds.exchange_destination(exchange), message, None)

    def _send(
        self, destination: str, message: dict[str, Any], arguments: Mapping[str, Any] | None
    ) -> None:
        self.feeds.client.send(
            destination,
            wire_body(message),
            content_type="application/json",
            headers=send_headers(message, arguments),
            receipt=bool(self.options["confirm_publish"]),
        )

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        message = super().basic_get(queue, no_ack, **kwargs)
        if message is not None and no_ack:
            self.feeds.settle(message.delivery_tag, ack=True)  # taken is consumed
        return message

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        feeds = self.feeds
        if not feeds.consumed(queue):
            feeds.consume(queue, 1, self._subscribe_headers(queue))
        deadline = time.monotonic() + float(self.options["get_wait"])
        while True:
            since = feeds.generation
            delivery = feeds.take(queue)
            left = deadline - time.monotonic()
            if delivery is not None or left <= 0 or feeds.failure is not None:
                break
            feeds.wait(left, since)
        if delivery is None:
            if feeds.failure is not None:
                raise feeds.failure
            raise Empty()
        return delivery.envelope

    def _subscribe_headers(self, queue: str) -> dict[str, str]:
        return queue_headers(self.connection.queue_arguments.get(queue))

    # -- exchanges -------------------------------------------------------------

    def basic_publish(
        self, message: dict[str, Any], exchange: str, routing_key: str, **kwargs: Any
    ) -> None:
        self._inplace_augment_message(message, exchange, routing_key)
        if not exchange:
            self._put(routing_key, message)
            return
        kind = self.typeof(exchange).type
        if kind == "direct":
            queues = self._bound(exchange, routing_key)
            if queues:
                for queue in queues:
                    self._put(queue, message)
                return
        # Fanout, topic, and a direct exchange whose bindings live elsewhere: every
        # process with a bound queue listens on the exchange's topic.
        self._put_fanout(exchange, message, routing_key)

    def _bound(self, exchange: str, routing_key: str) -> set[str]:
        try:
            table = self.get_table(exchange)
        except KeyError:
            return set()
        return {queue for key, _, queue in table if key == routing_key}

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        kind = self.typeof(exchange).type
        if kind == "fanout":
            self.feeds.bind(queue, exchange, lambda key: True)
        elif kind == "topic":
            matcher = self.typeof(exchange)
            self.feeds.bind(queue, exchange, lambda key: bool(matcher._match(pattern, key)))
        else:
            self.feeds.bind(queue, exchange, lambda key: key == routing_key)

    def queue_unbind(
        self,
        queue: str,
        exchange: str | None = None,
        routing_key: str = "",
        arguments: Any = None,
        **kwargs: Any,
    ) -> None:
        super().queue_unbind(queue, exchange, routing_key, arguments, **kwargs)
        if exchange:
            self.feeds.unbind(queue, exchange)

    # -- consuming -------------------------------------------------------------

    def basic_consume(
        self, queue: str, no_ack: bool, callback: Any, consumer_tag: str, **kwargs: Any
    ) -> None:
        window = self.qos.prefetch_count or int(self.options["prefetch_count"])
        self.feeds.consume(queue, window, self._subscribe_headers(queue), auto=no_ack)
        super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)
        self.connection.wake()

    def basic_cancel(self, consumer_tag: str) -> None:
        queue = self._tag_to_queue.get(consumer_tag)
        super().basic_cancel(consumer_tag)
        if queue is not None and not any(
            queue in channel._active_queues for channel in self.connection.channels
        ):
            self.feeds.cancel(queue)

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        self.qos.ack(delivery_tag)
        self.connection.wake()

    def basic_qos(
        self, prefetch_size: int = 0, prefetch_count: int = 0, apply_global: bool = False
    ) -> None:
        super().basic_qos(prefetch_size, prefetch_count, apply_global)
        self.connection.wake()

    def take_one(self) -> tuple[dict[str, Any], str] | None:
        """A message for one of this channel's consumers, if one is buffered and
        the prefetch count allows (fair: the queues take turns)."""
        if not self._consumers or not self.qos.can_consume():
            return None
        queues = self._active_queues
        for _ in range(len(queues)):
            queue = queues[0]
            queues.append(queues.pop(0))  # round robin
            delivery = self.feeds.take(queue)
            if delivery is not None:
                return delivery.envelope, queue
        return None


#: The most messages one ``drain_events`` call delivers.  Kombu's own suite expects
#: one call to deliver what is ready, as pyamqp does; but a caller that drains
#: until one message comes must not be flooded: Celery's ``rpc://`` result
#: consumer keeps the results it was not waiting for in a buffer of 8192 and
#: drops the oldest beyond it, which lost results of 10,000 tasks waited on in
#: order when one call delivered every reply at once.
DRAIN_BATCH = 100


class Transport(virtual.Transport):  # type: ignore[misc]
    """Kombu's transport for STOMP brokers, on stomp_proto's threads client.

    ``kombu.Connection("stomp://guest:guest@127.0.0.1:61613//",
    transport="stomp_proto_kombu:Transport")``; once ``stomp_proto_kombu`` is
    imported, the ``stomp`` and ``stomps`` (TLS) schemes name it.
    """

    Channel = Channel

    default_port = DEFAULT_PORT
    driver_type = "stomp"
    driver_name = "stomp-proto"
    #: Errors that mean the connection is gone: Kombu and Celery connect again.
    connection_errors = (*virtual.Transport.connection_errors, ClientError, OSError)
    channel_errors = virtual.Transport.channel_errors

    implements = virtual.Transport.implements.extend(
        asynchronous=True,
        exchange_type=frozenset(["direct", "topic", "fanout"]),
        heartbeats=True,
    )

    def __init__(self, client: Any, **kwargs: Any) -> None:
        self.options = _checked_options(client.transport_options or {})
        super().__init__(client, **kwargs)
        self._feeds: Feeds | None = None
        #: A queue's declared arguments (x-max-priority ...), sent with its frames.
        self.queue_arguments: dict[str, dict[str, Any]] = {}
        self._loop: Any = None
        #: The socket the event loop watches, and the session it belongs to (a
        #: reconnect may give the new socket the old one's number).
        self._socket: tuple[int, object] | None = None

    @property
    def feeds(self) -> Feeds:
        if self._feeds is None or self._feeds.closed:
            raise stomp_proto.threads.ConnectionLost("the STOMP connection is not open")
        return self._feeds

    def driver_version(self) -> str:
        return importlib.metadata.version("stomp-proto")

    # -- the connection --------------------------------------------------------

    def establish_connection(self) -> Transport:
        conninfo = self.client
        heartbeat = conninfo.heartbeat
        beat = self.options["heartbeat"] if not heartbeat else (int(heartbeat * 1000),) * 2
        timeout = conninfo.connect_timeout or 10.0
        feeds_ready = threading.Event()
        holder: list[Feeds] = []

        def on_state_change(state: ClientState, error: BaseException | None) -> None:
            if state in (ClientState.FAILED, ClientState.CLOSED) and feeds_ready.is_set():
                holder[0].lost(error)

        host, port = conninfo.hostname or "127.0.0.1", int(conninfo.port or self.default_port)
        try:
            client = self._connect(host, port, beat, timeout, on_state_change)
        except stomp_proto.BrokerError as exc:
            # The broker's reason, with the broker named (its ERROR frame names
            # neither it nor the login); still a connection error, which Kombu and
            # Celery retry as they retry a refused socket.
            raise ConnectionRefusedError(
                f"the STOMP broker at {host}:{port} refused the CONNECT of "
                f"{conninfo.userid!r}: {exc}"
            ) from exc
        self._feeds = Feeds(
            client,
            queue_prefix=str(self.options["queue_prefix"]),
            topic_prefix=str(self.options["topic_prefix"]),
        )
        holder.append(self._feeds)
        feeds_ready.set()
        result: Transport = super().establish_connection()
        return result

    def _connect(
        self,
        host: str,
        port: int,
        beat: Any,
        timeout: float,
        on_state_change: Callable[[ClientState, BaseException | None], None],
    ) -> stomp_proto.threads.Client:
        conninfo = self.client
        return stomp_proto.threads.connect(
            host,
            port,
            login=conninfo.userid,
            passcode=conninfo.password,
            vhost=conninfo.virtual_host or "/",
            heartbeat=tuple(beat),
            versions=tuple(self.options["versions"]),
            ssl=self._ssl_context(),
            timeout=timeout,
            connect_timeout=timeout,
            on_state_change=on_state_change,
        )

    def _ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context from Kombu's ``ssl`` argument (Celery's ``broker_use_ssl``);
        the ``stomps`` scheme alone means TLS with the system's trusted CAs."""
        given = self.client.ssl
        if isinstance(given, ssl.SSLContext):
            return given
        if not given and self.client.transport_cls != "stomps":
            return None
        context = ssl.create_default_context()
        if isinstance(given, Mapping):
            settings = {key.removeprefix("ssl_"): value for key, value in given.items()}
            ca = settings.get("ca_certs")
            if ca:
                context.load_verify_locations(ca)
            cert = settings.get("certfile")
            if cert:
                context.load_cert_chain(cert, settings.get("keyfile"))
            reqs = settings.get("cert_reqs")
            if reqs is not None:
                if reqs == ssl.CERT_NONE:
                    context.check_hostname = False
                context.verify_mode = reqs
            if "check_hostname" in settings:
                context.check_hostname = bool(settings["check_hostname"])
        return context

    def close_connection(self, connection: Any) -> None:
        try:
            super().close_connection(connection)
        finally:
            feeds, self._feeds = self._feeds, None
            if feeds is not None:
                feeds.close()

    def verify_connection(self, connection: Any) -> bool:
        feeds = self._feeds
        return feeds is not None and feeds.failure is None and not feeds.closed

    def heartbeat_check(self, connection: Any, rate: int = 2) -> None:
        """Heart-beats are the client's own (its background thread); this only
        raises when they found the broker gone."""
        feeds = self._feeds
        if feeds is not None and feeds.failure is not None:
            raise feeds.failure

    def get_heartbeat_interval(self, connection: Any) -> float:
        heartbeat = self.client.heartbeat
        return float(heartbeat) if heartbeat else 0.0

    # -- delivering ------------------------------------------------------------

    def wake(self) -> None:
        """Something may have become deliverable: wake whoever waits for it."""
        feeds = self._feeds
        if feeds is not None:
            feeds.poke()

    def _deliver_one(self) -> bool:
        for channel in list(self.channels):
            taken = channel.take_one()
            if taken is not None:
                envelope, queue = taken
                self._deliver(envelope, queue)
                return True
        return False

    def drain_events(self, connection: Any, timeout: float | None = None) -> None:
        """Deliver what is buffered for consumers (as the prefetch count allows, and
        at most :data:`DRAIN_BATCH` messages), waiting up to ``timeout`` seconds for
        the first (``socket.timeout`` then, as every transport raises)."""
        feeds = self.feeds
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if feeds.failure is not None:
                raise feeds.failure
            since = feeds.generation
            if self._deliver_one():
                for _ in range(DRAIN_BATCH - 1):
                    if feeds.failure is not None or not self._deliver_one():
                        break
                return
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError()  # socket.timeout, which Kombu expects
            # Read on this thread, with no hand-off; when another thread reads (or
            # none may), wait for what it delivers.
            if not feeds.client.pump(left):
                feeds.wait(left, since)

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        """Celery's event loop reads the client's socket itself (``pump``), so a
        message reaches it with no thread between; the feeds' descriptor is
        readable while a message the client's own thread read waits."""
        self._loop = loop
        feeds = self.feeds
        loop.add_reader(feeds.fileno(), self.on_readable, connection, loop)
        feeds.watch(True)
        self._watch_socket(connection, loop)

    def unregister_from_event_loop(self, connection: Any, loop: Any) -> None:
        feeds = self._feeds
        self._unwatch_socket(loop)
        if feeds is not None:
            loop.remove_reader(feeds.fileno())
            if not feeds.closed:
                feeds.watch(False)
        self._loop = None

    def _watch_socket(self, connection: Any, loop: Any) -> None:
        """Have the loop watch the current connection's socket (again after a
        reconnect, or after :meth:`on_socket_readable` left it)."""
        client = self.feeds.client
        fd = client.fileno()
        if fd < 0 or self._socket == (fd, client.connection):
            return
        self._unwatch_socket(loop)
        loop.add_reader(fd, self.on_socket_readable, connection, loop)
        self._socket = (fd, client.connection)
        client.loop_reads(True)

    def _unwatch_socket(self, loop: Any) -> None:
        if self._socket is None:
            return
        fd, self._socket = self._socket[0], None
        with contextlib.suppress(Exception):  # closed by a reconnect meanwhile
            loop.remove_reader(fd)
        feeds = self._feeds
        if feeds is not None and not feeds.closed:
            feeds.client.loop_reads(False)

    def on_socket_readable(self, connection: Any, loop: Any) -> None:
        """Read what came, on the loop's thread, then deliver."""
        if not self.feeds.client.pump(0):
            # Another thread reads now, or the connection is gone: the client's
            # own thread reads meanwhile and delivers through the feeds'
            # descriptor, which watches the socket again.  (A readable socket the
            # loop may not read would make it spin.)
            self._unwatch_socket(loop)
            return
        self.on_readable(connection, loop)

    def on_readable(self, connection: Any, loop: Any) -> None:
        """Deliver what is buffered and may be delivered now (the prefetch count
        allowing), one message per turn of the loop."""
        feeds = self.feeds
        if feeds.failure is not None:
            raise feeds.failure
        self._watch_socket(connection, loop)
        if not self._deliver_one():
            # Nothing may go now (empty, or the prefetch count is reached): stop
            # the descriptor being readable, then look once more, since a
            # message may have come in between (it made it readable again).
            feeds.quiet()
            if not self._deliver_one():
                return
        loop.call_soon(self.on_readable, connection, loop)

    @property
    def default_connection_params(self) -> dict[str, Any]:
        return {"port": self.default_port, "hostname": "127.0.0.1"}

    def as_uri(self, uri: str, include_password: bool = False, mask: str = "**") -> str:
        return uri
