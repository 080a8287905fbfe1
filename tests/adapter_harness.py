"""Run one client scenario on every adapter: asyncio, trio and threads.

A scenario is an ``async def`` taking a :class:`Harness`; it is written once,
against the API of :class:`stomp_proto.asyncio.AsyncClient`.  The harness
runs it three ways:

* ``asyncio``: under :func:`asyncio.run`, with ``stomp_proto.asyncio.connect``;
* ``trio``: under :func:`trio.run`, with ``stomp_proto.trio.connect``;
* ``threads``: under :func:`asyncio.run`, with ``stomp_proto.threads.connect``,
  where every blocking call runs in a worker thread (:class:`ThreadsClient`
  dresses the blocking client in the async API).

The brokers (and the fake servers of the fault tests) live elsewhere: in an
asyncio event loop of their own, in a daemon thread (:class:`ServiceLoop`).
That loop keeps running whatever the scenario's loop does - it may be trio's,
or blocked in the threads client - and it is checked at the end of every test
for tasks left running.  The scenario's own loop is checked too, as is the
log (any WARNING from asyncio, the broker or the client fails the test) and
the set of threads (a threads client must not leave its reader behind).

Everything is bounded: the scenario as a whole, each client's connect and
receipt waits (``timeout=CLIENT_TIMEOUT``), each wait for a message (``WAIT``)
and each call into the service loop.  Each bound is its idle-machine value
scaled by the measured load factor (``timeouts.scaled``), and a time-out says
what it waited for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import gc
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    suppress,
)
from typing import Any, TypeVar

import pytest
import trio
from helpers import LogRecords
from timeouts import bound_text, scaled

from stomp_proto import ClientConnection, Message, Version
from stomp_proto import threads as stomp_threads
from stomp_proto import trio as stomp_trio
from stomp_proto.asyncio import (
    Backoff,
    BrokerError,
    ClientError,
    ClientState,
    ClientStats,
    ConnectionLost,
    HeartBeatLost,
    ReconnectExhausted,
)
from stomp_proto.asyncio import connect as asyncio_connect
from stomp_proto.broker import Broker, BrokerCore, Outbox

__all__ = [
    "ADAPTERS",
    "CLIENT_TIMEOUT",
    "HOST",
    "VERSIONS",
    "WAIT",
    "Backoff",
    "BrokerError",
    "ClientError",
    "ClientState",
    "ClientStats",
    "ConnectionLost",
    "Harness",
    "HeartBeatLost",
    "ReconnectExhausted",
    "ServiceLoop",
    "ThreadsClient",
    "free_port",
    "in_thread",
    "on_every_adapter",
    "run",
]

T = TypeVar("T")

ADAPTERS = ("asyncio", "trio", "threads")
VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")
HOST = "127.0.0.1"
# The bounds below are 5, 5, 30 and 15 s on an idle machine, times the load factor.
#: The clients' ``timeout`` option: seconds for connecting and for each receipt.
CLIENT_TIMEOUT = scaled(5.0)
#: Seconds a scenario waits for one message.
WAIT = scaled(5.0)
#: Seconds a whole scenario may take, on an idle machine: ``run`` scales it (the
#: global pytest timeout is far larger).
SCENARIO_TIMEOUT = 30.0
#: Seconds a call into the service loop may take, on an idle machine.
SERVICE_CALL = 15.0
#: Threads named like this belong to a blocking client (its reader and event loop).
READER_THREAD = "stomp_proto-reader"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (free a moment ago)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@contextmanager
def dead_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that refuses connections for as long as the block runs.

    Its socket stays bound and never listens, so nothing else can take the port
    meanwhile: a port picked free and let go can be another test's broker a moment
    later (CI runs several test runs at once), and the connection then succeeds.
    """
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        yield int(sock.getsockname()[1])


# -- the service loop: brokers and fake servers ------------------------------------


class _VanishingCore(BrokerCore):
    """A broker core whose shutdown says nothing: to its clients the broker just vanishes.

    ``Broker.close`` normally sends every client an ERROR ``broker shutting
    down`` first; without it the clients see their connections drop, as when a
    broker process dies or the network fails.
    """

    def shut_down(self, reason: str = "broker shutting down") -> Outbox:
        return Outbox()


#: The keywords of ``Broker`` that are not ``BrokerCore``'s.
SERVER_OPTIONS = ("ssl", "websocket", "allowed_origins", "metrics")


class ServiceLoop:
    """An asyncio event loop in a daemon thread, hosting brokers and fake servers."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="test-service-loop", daemon=True
        )
        self._thread.start()
        self.brokers: list[Broker] = []
        self._servers: list[asyncio.Server] = []
        self._handlers: set[asyncio.Task[None]] = set()
        #: Called (on this loop) first when the loop shuts down, whatever the test did.
        self.closers: list[Callable[[], Awaitable[None]]] = []

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = SERVICE_CALL) -> T:
        """Run ``coroutine`` on the service loop and wait for its result (blocking);
        ``timeout`` is the bound on an idle machine (scaled by the load factor)."""
        name = getattr(coroutine, "__qualname__", repr(coroutine))
        try:
            return self.submit(coroutine).result(scaled(timeout))
        except concurrent.futures.TimeoutError:
            raise TimeoutError(
                f"{name} on the service loop: not done after {bound_text(timeout)}"
            ) from None

    # These run on the service loop.

    async def start_broker(self, port: int, vanishing: bool, options: dict[str, Any]) -> Broker:
        broker = Broker(HOST, port, **options)
        if vanishing:
            broker.core = _VanishingCore(
                # the core's options (the others are the server's)
                **{k: v for k, v in options.items() if k not in SERVER_OPTIONS}
            )
        await broker.start()
        self.brokers.append(broker)
        return broker

    async def start_server(
        self, handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
    ) -> int:
        """A plain TCP server on a free port running ``handler`` per connection."""

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            async def serve() -> None:
                try:
                    await handler(reader, writer)
                finally:
                    writer.close()
                    try:
                        await asyncio.wait_for(writer.wait_closed(), 2)
                    except (OSError, TimeoutError):
                        writer.transport.abort()

            task = self.loop.create_task(serve())
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

        server = await asyncio.start_server(accept, HOST, 0)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def _shut_down(self) -> list[asyncio.Task[Any]]:
        for closer in self.closers:
            await closer()
        for broker in self.brokers:
            await broker.close()
        for server in self._servers:
            server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        await asyncio.sleep(0)
        return list(asyncio.all_tasks() - {asyncio.current_task()})

    def close(self) -> list[str]:
        """Close every broker and server, stop the loop; returns what was left running."""
        try:
            leftovers = [repr(task) for task in self.call(self._shut_down(), timeout=20)]
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(scaled(10))
        if not self._thread.is_alive():
            self.loop.close()
        return leftovers


# -- the threads client behind the async API ----------------------------------------


async def in_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call in a new daemon thread and await its result (on asyncio).

    Not ``asyncio.to_thread``: its executor is joined by ``asyncio.run``, so a
    call that never returned would hang the test instead of failing it.  Like it,
    the call runs in a copy of the caller's context (an ambient span, say).
    """
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        value: Any = None
        error: BaseException | None = None
        try:
            value = context.run(function, *args, **kwargs)
        except BaseException as exc:
            error = exc
        with suppress(RuntimeError):  # the scenario's loop is gone (it timed out)
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=work, name="test-blocking-call", daemon=True).start()
    return await future


@asynccontextmanager
async def _threaded(manager: AbstractContextManager[T]) -> AsyncIterator[T]:
    """A blocking context manager, entered and left in worker threads.

    Left the same way after the client was closed inside the block: that
    must not raise, as with the async clients (``test_blocks_after_close``).
    """
    value = await in_thread(manager.__enter__)
    try:
        yield value
    except BaseException as exc:
        if not await in_thread(manager.__exit__, type(exc), exc, exc.__traceback__):
            raise
    else:
        await in_thread(manager.__exit__, None, None, None)


class ThreadsSubscription:
    """A :class:`stomp_proto.threads.Subscription` with the AsyncSubscription API."""

    def __init__(self, subscription: stomp_threads.Subscription) -> None:
        self._subscription = subscription

    @property
    def id(self) -> str:
        return self._subscription.id

    @property
    def destination(self) -> str:
        return self._subscription.destination

    async def get(self, timeout: float | None = None) -> Message | None:
        return await in_thread(self._subscription.get, timeout)

    def __aiter__(self) -> ThreadsSubscription:
        return self

    async def __anext__(self) -> Message:
        message = await self.get(WAIT)  # bounded, unlike the blocking iterator
        if message is None:
            raise StopAsyncIteration
        return message


class ThreadsClient:
    """A :class:`stomp_proto.threads.Client` with the AsyncClient API."""

    def __init__(self, client: stomp_threads.Client) -> None:
        self._client = client

    @property
    def version(self) -> Version | None:
        return self._client.version

    @property
    def connection(self) -> ClientConnection:
        return self._client.connection

    @property
    def broker(self) -> tuple[str, int]:
        return self._client.broker

    @property
    def state(self) -> ClientState:
        return self._client.state

    @property
    def stats(self) -> ClientStats:
        return self._client.stats

    async def send(self, destination: str, body: bytes | str = b"", **options: Any) -> None:
        await in_thread(self._client.send, destination, body, **options)

    @asynccontextmanager
    async def subscribe(self, destination: str, **options: Any) -> AsyncIterator[Any]:
        manager = self._client.subscribe(destination, **options)
        async with _threaded(manager) as subscription:
            yield ThreadsSubscription(subscription)

    async def ack(self, message: Message, **options: Any) -> None:
        await in_thread(self._client.ack, message, **options)

    async def nack(self, message: Message, **options: Any) -> None:
        await in_thread(self._client.nack, message, **options)

    def transaction(self) -> AbstractAsyncContextManager[str]:
        return _threaded(self._client.transaction())

    def session_events(self) -> AsyncIterator[Any]:
        """The threads client's blocking iterator, each ``next()`` in a thread."""
        return _threaded_iterator(self._client.session_events())

    async def disconnect(self) -> None:
        await in_thread(self._client.disconnect)

    async def close(self) -> None:
        await in_thread(self._client.close)


async def _threaded_iterator(events: Any) -> AsyncIterator[Any]:
    while (event := await in_thread(next, events, None)) is not None:
        yield event


@asynccontextmanager
async def _connect_threads(
    port: int | None, options: dict[str, Any]
) -> AsyncIterator[ThreadsClient]:
    address = () if port is None else (HOST, port)
    client = ThreadsClient(await in_thread(stomp_threads.connect, *address, **options))
    try:
        yield client
    except BaseException:
        await client.close()
        raise
    await client.disconnect()  # a no-op when the scenario closed it already


# -- the harness ----------------------------------------------------------------------


class Harness:
    """What a scenario gets: brokers and fake servers, clients of one adapter, sleep.

    ``version`` is the STOMP version the clients offer (``None``: all of
    them); ``connect`` passes it, and ``timeout=CLIENT_TIMEOUT``, unless told
    otherwise.
    """

    def __init__(self, adapter: str, version: Version | None, service: ServiceLoop) -> None:
        if adapter not in ADAPTERS:
            raise ValueError(f"unknown adapter {adapter!r}")
        self.adapter = adapter
        self.version = version
        self.service = service

    # -- time ---------------------------------------------------------------------

    async def sleep(self, seconds: float) -> None:
        if self.adapter == "trio":
            await trio.sleep(seconds)
        else:
            await asyncio.sleep(seconds)

    async def gather(self, *awaitables: Awaitable[Any]) -> list[Any]:
        """Run ``awaitables`` side by side on the scenario's loop; their results, in order.

        The first exception is raised once all have ended.
        """
        if self.adapter != "trio":
            return list(await asyncio.gather(*awaitables))
        results: list[Any] = [None] * len(awaitables)
        errors: list[BaseException] = []

        async def one(index: int, awaitable: Awaitable[Any]) -> None:
            try:
                results[index] = await awaitable
            except Exception as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for index, awaitable in enumerate(awaitables):
                nursery.start_soon(one, index, awaitable)
        if errors:
            raise errors[0]
        return results

    # -- the service loop -----------------------------------------------------------

    async def on_service(
        self, coroutine: Coroutine[Any, Any, T], timeout: float | None = SERVICE_CALL
    ) -> T:
        """Run ``coroutine`` on the service loop; await it from the scenario's loop.

        ``timeout``: the bound on an idle machine (scaled by the load factor);
        None for a coroutine bounded by itself (``timeouts.run_command``), which
        the scenario's own bound still covers.
        """
        name = getattr(coroutine, "__qualname__", repr(coroutine))
        future = self.service.submit(coroutine)
        bound = None if timeout is None else scaled(timeout)
        try:
            if self.adapter == "trio":
                return await trio.to_thread.run_sync(future.result, bound, abandon_on_cancel=True)
            return await asyncio.wait_for(asyncio.wrap_future(future), bound)
        except (TimeoutError, concurrent.futures.TimeoutError):
            if future.done() and not future.cancelled() and future.exception() is not None:
                raise  # the coroutine's own time-out, which says what it waited for
            assert timeout is not None
            raise TimeoutError(
                f"{name} on the service loop: not done after {bound_text(timeout)}"
            ) from None

    async def start_broker(
        self, port: int = 0, *, vanishing: bool = False, **options: Any
    ) -> Broker:
        """A :class:`Broker` on 127.0.0.1 (``port`` 0: a free one); closed after the test.

        ``vanishing=True``: closing it sends no ERROR, the connections just drop.
        """
        return await self.on_service(self.service.start_broker(port, vanishing, options))

    async def stop_broker(self, broker: Broker) -> None:
        await self.on_service(broker.close())

    async def queued(self, broker: Broker, destination: str) -> int:
        """Messages waiting in a queue of ``broker`` (read on the broker's own loop)."""

        async def count() -> int:
            return broker.core.queued(destination)

        return await self.on_service(count())

    async def sessions(self, broker: Broker) -> int:
        async def count() -> int:
            return len(broker.core.sessions)

        return await self.on_service(count())

    async def start_server(
        self, handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
    ) -> int:
        """A fake server (``handler`` runs on the service loop per connection); its port."""
        return await self.on_service(self.service.start_server(handler))

    # -- clients ------------------------------------------------------------------

    def options(self, **options: Any) -> dict[str, Any]:
        """``connect`` options with the harness defaults filled in."""
        if self.version is not None:
            options.setdefault("versions", (self.version,))
        options.setdefault("timeout", CLIENT_TIMEOUT)
        return options

    def connect(self, port: int | None, **options: Any) -> AbstractAsyncContextManager[Any]:
        """``async with h.connect(port, **options) as client``: the adapter's client.

        The client has the API of :class:`~stomp_proto.asyncio.AsyncClient`
        (for threads, through :class:`ThreadsClient`).  ``port=None``: the
        options say where (``hosts=[...]``, or a URL as ``host``).
        """
        options = self.options(**options)
        if port is None:
            if self.adapter == "asyncio":
                return asyncio_connect(**options)
            if self.adapter == "trio":
                return stomp_trio.connect(**options)
            return _connect_threads(None, options)
        if self.adapter == "asyncio":
            return asyncio_connect(HOST, port, **options)
        if self.adapter == "trio":
            return stomp_trio.connect(HOST, port, **options)
        return _connect_threads(port, options)

    async def expect_only(self, port: int, destination: str, *, ack: str = "auto") -> list[Message]:
        """Subscribe anew; check that nothing but a fresh sentinel message is waiting.

        A queue delivers redelivered messages first (at its front), so if
        anything was left in ``destination`` it arrives before the sentinel.
        Returns what arrived (the sentinel alone when the check passes).
        """
        async with self.connect(port) as client, client.subscribe(destination, ack=ack) as sub:
            await client.send(destination, b"sentinel", receipt=True)
            seen = [await sub.get(WAIT)]
            if ack != "auto":
                await client.ack(seen[0])
        assert [m.body for m in seen] == [b"sentinel"], seen
        return seen

    # -- running ------------------------------------------------------------------

    def _too_slow(self, scenario: Scenario, timeout: float) -> TimeoutError:
        return TimeoutError(
            f"the scenario {scenario.__qualname__} on {self.adapter}: not done after "
            f"{bound_text(timeout)}"
        )

    async def _main_asyncio(self, scenario: Scenario, timeout: float) -> None:
        bound = asyncio.timeout(scaled(timeout))
        try:
            async with bound:
                await scenario(self)
        except TimeoutError as exc:
            if bound.expired():
                raise self._too_slow(scenario, timeout) from exc
            raise
        leftovers = asyncio.all_tasks() - {asyncio.current_task()}
        assert not leftovers, f"tasks left running on the scenario's loop: {leftovers}"

    async def _main_trio(self, scenario: Scenario, timeout: float) -> None:
        try:
            with trio.fail_after(scaled(timeout)):
                await scenario(self)
        except trio.TooSlowError as exc:
            raise self._too_slow(scenario, timeout) from exc


Scenario = Callable[[Harness], Awaitable[None]]


def run(
    adapter: str,
    scenario: Scenario,
    *,
    version: Version | None = None,
    timeout: float = SCENARIO_TIMEOUT,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> None:
    """Run ``scenario`` on ``adapter``, bounded, then check that nothing was left behind.

    ``timeout``: the scenario's bound on an idle machine (scaled by the load factor).

    ``loop_factory``: the event loop an asyncio scenario runs on (another
    implementation, such as uvloop's); by default asyncio's own.
    """
    # WARNING (and worse) from asyncio, trio, the broker and the client fail the
    # test, but for the clients' sessions logger: lost sessions and give-ups are
    # logged there on purpose wherever a test ends sessions (test_client_lifecycle
    # checks those records).
    recorder = LogRecords("asyncio", "stomp_proto", "trio", ignore="stomp_proto.client.sessions")
    service = ServiceLoop()
    harness = Harness(adapter, version, service)
    leftovers: list[str] = []
    with recorder.installed():
        try:
            if adapter == "trio":
                trio.run(harness._main_trio, scenario, timeout)
            else:
                with asyncio.Runner(loop_factory=loop_factory) as runner:
                    runner.run(harness._main_asyncio(scenario, timeout))
        finally:
            leftovers = service.close()
            # Now, so that an unclosed transport or a never-awaited coroutine is
            # blamed on this test and not on whichever runs next.
            gc.collect()
    assert not leftovers, f"tasks left running on the broker's loop: {leftovers}"
    readers = [t for t in threading.enumerate() if t.name == READER_THREAD]
    assert not readers, f"threads client left its reader running: {readers}"
    assert not recorder.records, recorder.messages()


def on_every_adapter(
    *,
    versions: tuple[Version | None, ...] = VERSIONS,
    xfail: Mapping[str, str] | None = None,
    timeout: float = SCENARIO_TIMEOUT,
) -> Callable[[Scenario], Callable[[str, Version | None], None]]:
    """Make an async scenario a test, run for every adapter and each of ``versions``.

    ``versions=(None,)`` lets the clients negotiate (1.2).  ``xfail`` maps an
    adapter to the reason it is expected to fail (a known bug; strict).
    """

    def decorate(scenario: Scenario) -> Callable[[str, Version | None], None]:
        cases = []
        for adapter in ADAPTERS:
            marks = []
            if xfail and adapter in xfail:
                marks.append(pytest.mark.xfail(strict=True, reason=xfail[adapter]))
            for version in versions:
                case_id = adapter if version is None else f"{adapter}-{version}"
                cases.append(pytest.param(adapter, version, id=case_id, marks=marks))

        @pytest.mark.parametrize(("adapter", "version"), cases)
        def test(adapter: str, version: Version | None) -> None:
            run(adapter, scenario, version=version, timeout=timeout)

        # Not functools.wraps: pytest would then see the scenario's signature.
        test.__name__ = scenario.__name__
        test.__qualname__ = scenario.__qualname__
        test.__doc__ = scenario.__doc__
        test.__module__ = scenario.__module__
        return test

    return decorate
