"""The consumer, the app it serves, and the channel layer between the processes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, ClassVar, Unpack

from channels.consumer import AsyncConsumer
from channels.layers import get_channel_layer

from stomp_proto import ErrorKind, LocalProtocolError
from stomp_proto.asgi import AppMessage, Relay, StompApp
from stomp_proto.broker import BrokerOptions

log = logging.getLogger("stomp_proto_channels")

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: The channel layer group every process's app joins, and the topic messages go to.
GROUP = "stomp_proto.topics"
#: The ``type`` of the channel layer messages that carry a topic message: its
#: ``destination``, ``headers`` and ``content_type``, and its body as ``text``
#: (UTF-8) or, when it is not text, ``base64`` - strings only, for every layer.
MESSAGE_TYPE = "stomp.topic.message"
#: The channel layer of :func:`make_app` and :func:`publish` by default (Channels' own).
DEFAULT_LAYER = "default"
#: Seconds between two joins of the group by an app (layers expire memberships after a day).
REJOIN_INTERVAL = 3600.0
_TOPIC_PREFIX = "/topic/"


def django_user(scope: _Scope) -> str | None:
    """The username of the Django user in ``scope`` (``AuthMiddlewareStack``), if authenticated.

    The ``authenticate`` hook of :func:`make_app` by default: ``None`` (an
    anonymous user, or no ``AuthMiddlewareStack``) leaves it to CONNECT's login.
    """
    user = scope.get("user")
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    name = user.get_username()
    return str(name) if name else None


def _layer_message(
    destination: str, body: bytes, headers: Iterable[tuple[str, str]], content_type: str | None
) -> dict[str, Any]:
    """The channel layer message carrying a topic message: strings, lists and None only,
    which every layer serializes (some take no bytes: JSON)."""
    message: dict[str, Any] = {
        "type": MESSAGE_TYPE,
        "destination": destination,
        "headers": [[name, value] for name, value in headers],
        "content_type": content_type,
    }
    try:
        message["text"] = body.decode("utf-8")
    except UnicodeDecodeError:
        message["base64"] = base64.b64encode(body).decode("ascii")
    return message


def _body_of(message: dict[str, Any]) -> bytes:
    if "text" in message:
        return str(message["text"]).encode("utf-8")
    return base64.b64decode(message["base64"])


class _Bridge:
    """An app's side of the channel layer: sends its clients' topic messages to
    the group, and publishes what the group gets to the app's subscribers."""

    def __init__(self, alias: str, group: str) -> None:
        self.alias = alias
        self.group = group
        self.app: StompApp | None = None
        self.task: asyncio.Task[None] | None = None
        self.joined: asyncio.Future[None] | None = None

    async def forward(self, message: AppMessage) -> None:
        """The app's ``forward_topics``: a client's SEND to a topic, to every process."""
        layer = get_channel_layer(self.alias)
        if layer is None:  # no layer configured: this process's subscribers only
            await message.app.publish(
                message.destination,
                message.body,
                headers=message.headers,
                content_type=message.content_type,
            )
            return
        await layer.group_send(
            self.group,
            _layer_message(
                message.destination, message.body, message.headers, message.content_type
            ),
        )

    async def start(self) -> None:
        """Join the group, once per event loop; return once joined."""
        loop = asyncio.get_running_loop()
        task = self.task
        if task is None or task.done() or task.get_loop() is not loop:
            layer = get_channel_layer(self.alias)
            if layer is None:
                return
            self.joined = loop.create_future()
            self.task = loop.create_task(self._run(layer, self.joined))
        assert self.joined is not None
        await asyncio.shield(self.joined)

    async def _run(self, layer: Any, joined: asyncio.Future[None]) -> None:
        """Join, then deliver what the group gets until cancelled or the layer fails.

        A failure is logged and ends the task: the next connection starts it again.
        """
        try:
            channel = await layer.new_channel()
            await layer.group_add(self.group, channel)
        except Exception as exc:
            joined.set_exception(exc)  # for start(), which raises it
            return
        joined.set_result(None)
        try:
            while True:
                try:
                    message = await asyncio.wait_for(layer.receive(channel), REJOIN_INTERVAL)
                except TimeoutError:
                    await layer.group_add(self.group, channel)
                    continue
                await self._deliver(message)
        except Exception:
            log.exception("STOMP channels: the channel layer failed; topics wait for a rejoin")
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(layer.group_discard(self.group, channel))

    async def _deliver(self, message: dict[str, Any]) -> None:
        app = self.app
        if app is None or message.get("type") != MESSAGE_TYPE:
            return
        try:
            await app.publish(
                message["destination"],
                _body_of(message),
                headers=[(str(name), str(value)) for name, value in message["headers"]],
                content_type=message["content_type"],
            )
        except Exception:
            log.exception("STOMP channels: a message from the channel layer was not delivered")

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None and task.get_loop() is asyncio.get_running_loop():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


#: The bridge of each app :func:`make_app` made.
_BRIDGES: weakref.WeakKeyDictionary[StompApp, _Bridge] = weakref.WeakKeyDictionary()


def make_app(
    *,
    channel_layer_alias: str = DEFAULT_LAYER,
    group: str = GROUP,
    authenticate: Callable[[_Scope], str | Awaitable[str | None] | None] | None = django_user,
    allowed_origins: Iterable[str] = (),
    app_prefix: str = "/app/",
    relay: Relay | None = None,
    **options: Unpack[BrokerOptions],
) -> StompApp:
    """A :class:`~stomp_proto.asgi.StompApp` whose topics every process shares
    through the channel layer ``channel_layer_alias``, in ``group``.

    A client's SEND to a ``/topic/`` destination goes to the group, and each
    process's app hands what the group gets to its own subscribers.  Queues,
    acknowledgements, transactions, app and user destinations stay in the
    process.  Without a configured layer, topics are the process's own.  A
    SEND the layer fails to take is ERROR ``handler failed`` for its client;
    a process whose layer fails to deliver logs it, and joins again at its
    next connection.  ``authenticate`` defaults to :func:`django_user`; the other arguments are
    the :class:`~stomp_proto.asgi.StompApp` ones (a ``relay`` must not
    forward ``/topic/``).
    """
    bridge = _Bridge(channel_layer_alias, group)
    app = StompApp(
        authenticate=authenticate,
        allowed_origins=allowed_origins,
        app_prefix=app_prefix,
        relay=relay,
        forward_topics=bridge.forward,
        **options,
    )
    bridge.app = app
    _BRIDGES[app] = bridge
    return app


async def close_app(app: StompApp) -> None:
    """End the app's sessions (:meth:`~stomp_proto.asgi.StompApp.close`) and leave the group.

    For the process's shutdown, on the event loop the app serves on.
    """
    await app.close()
    bridge = _BRIDGES.get(app)
    if bridge is not None:
        await bridge.stop()


async def publish(
    destination: str,
    body: bytes | str = b"",
    *,
    headers: Iterable[tuple[str, str]] = (),
    content_type: str | None = None,
    channel_layer_alias: str = DEFAULT_LAYER,
    group: str = GROUP,
) -> None:
    """Send a message to a topic's subscribers in every process, through the channel layer.

    For any Django code (a view, a task; ``async_to_sync(publish)`` from
    synchronous code): ``body`` (a ``str`` goes as UTF-8) to ``destination``,
    a ``/topic/`` one, with ``content_type`` and the other ``headers``.
    ValueError for another destination: a queue is one process's
    (:meth:`~stomp_proto.asgi.StompApp.publish` on its app);
    LocalProtocolError when the layer is not configured.
    """
    if not destination.startswith(_TOPIC_PREFIX):
        raise ValueError(f"only topics go through the channel layer: {destination!r}")
    layer = get_channel_layer(channel_layer_alias)
    if layer is None:
        raise LocalProtocolError(
            ErrorKind.BAD_STATE, f"no channel layer {channel_layer_alias!r} is configured"
        )
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    await layer.group_send(group, _layer_message(destination, data, headers, content_type))


class StompConsumer(AsyncConsumer):  # type: ignore[misc]  # Channels is untyped
    """A Channels consumer serving STOMP over WebSocket from the process's app.

    Route it as any consumer: ``StompConsumer.as_asgi()`` in a ``URLRouter``,
    or ``as_asgi(app=...)`` with an app of :func:`make_app` (or a plain
    :class:`~stomp_proto.asgi.StompApp`, whose topics stay in the process).
    A subclass may set ``app`` instead.  Each WebSocket is a session of that
    app: it negotiates the subprotocol (``v12.stomp`` ...), checks the origin,
    and serves the connection to its end.
    """

    #: The app the consumer serves; ``None``: the class's own, made by :func:`make_app`.
    app: StompApp | None = None
    _default_app: ClassVar[StompApp | None] = None

    def __init__(self, *, app: StompApp | None = None) -> None:
        if app is not None:
            self.app = app

    @classmethod
    def default_app(cls) -> StompApp:
        """The class's own app (made at the first call, with :func:`make_app`'s defaults)."""
        app = cls.__dict__.get("_default_app")
        if app is None:
            app = make_app()
            cls._default_app = app
        assert isinstance(app, StompApp)
        return app

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        self.scope = scope
        app = self.app if self.app is not None else self.default_app()
        bridge = _BRIDGES.get(app)
        if bridge is not None:
            # Joined before the first SUBSCRIBE, so that no topic message passes it by.
            await bridge.start()
        await app(scope, receive, send)
