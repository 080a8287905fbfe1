"""Every real client, in its default configuration, against the embedded broker.

The clients: stomp.py's ``Connection`` (its default, STOMP 1.1),
``Connection10``, ``Connection11`` and ``Connection12``; stompest's
synchronous ``Stomp`` (STOMP 1.0 by default); aiostomp (1.1); stompman (1.2);
@stomp/stompjs over WebSocket under Node (``tests/js/matrix.mjs``); and our
asyncio, trio and threads clients through their public API.  Each is built
as its documentation shows, with no option beyond where to connect (stompman
insists on a login; stompjs under Node needs the ``ws`` package as its
WebSocket) against a broker with the default options - lenient, as RabbitMQ
and ActiveMQ are.

Every client plays the same scenario on a fresh queue, one step after the
other, each a test of its own (``test_client_matrix[CLIENT-STEP]``):

``connect``      log in (with the version the client defaults to);
``subscribe``    subscribe with client acknowledgements (``client-individual``;
                 ``client`` in 1.0);
``send``         send ``one``;
``receipt``      send ``two`` asking for a receipt, and get it;
``receive``      receive ``one``;
``ack``          acknowledge it;
``nack``         receive ``two``, NACK it, receive it again (redelivered),
                 acknowledge it (STOMP 1.0 has no NACK: ``two`` is acknowledged);
``transaction``  send ``aborted`` in a transaction that is aborted and
                 ``committed`` in one that is committed; receive ``committed``
                 (nothing else) and acknowledge it;
``disconnect``   leave as the client does by default; the broker then holds no
                 session, and nothing is left in the queue or unacknowledged.

A step the client cannot do is skipped with the reason (aiostomp has no
transactions, for one) and the scenario goes on without it; a step that fails
fails its test, and the steps after it fail as not reached.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import queue
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from adapter_harness import HOST, WAIT, ServiceLoop
from brokers import in_ci

from stomp_proto.broker import Broker, Session

pytestmark = pytest.mark.timeout(120)

STEPS = (
    "connect",
    "subscribe",
    "send",
    "receipt",
    "receive",
    "ack",
    "nack",
    "transaction",
    "disconnect",
)
PATH = "/ws"
NO_NACK_10 = "STOMP 1.0 has no NACK (the client's default version); 'two' is acknowledged instead"


class Skipped(Exception):
    """Raised inside a step: the client cannot do it (the message says why)."""


@dataclass
class Steps:
    """What happened to each step of one client's scenario."""

    results: dict[str, str] = field(default_factory=dict)

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        assert name in STEPS and name not in self.results, name
        try:
            yield
        except Skipped as exc:
            self.results[name] = f"skip: {exc}"
        except BaseException as exc:
            self.results[name] = f"failed: {exc!r}"
            raise
        else:
            self.results[name] = "ok"

    def skip(self, name: str, reason: str) -> None:
        with self(name):
            raise Skipped(reason)


@dataclass
class Inbox:
    """Messages a client's callback hands over, in order; bounded waits."""

    items: queue.Queue[Any] = field(default_factory=queue.Queue)

    def put(self, item: Any) -> None:
        self.items.put(item)

    def get(self) -> Any:
        return self.items.get(timeout=WAIT)

    async def aget(self) -> Any:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                return self.items.get_nowait()
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise TimeoutError("no message") from None
                await asyncio.sleep(0.01)


def body_of(frame: Any) -> bytes:
    body = getattr(frame, "body", frame)
    return body.encode() if isinstance(body, str) else bytes(body)


# -- the clients ------------------------------------------------------------------------


def stomppy(port: int, queue_name: str, steps: Steps, cls_name: str) -> None:
    import stomp
    from test_stomppy_interop import Recorder  # stomp.py's listener, with bounded waits

    conn = getattr(stomp, cls_name)([(HOST, port)])
    version = {"Connection10": "1.0", "Connection12": "1.2"}.get(cls_name, "1.1")
    listener = Recorder()
    conn.set_listener("matrix", listener)

    def ack(frame: Any, nack: bool = False) -> None:
        method = conn.nack if nack else conn.ack
        if version == "1.2":
            method(frame.headers["ack"])
        elif version == "1.1":
            method(frame.headers["message-id"], frame.headers["subscription"])
        else:
            method(frame.headers["message-id"])

    with steps("connect"):
        conn.connect(wait=True)
    with steps("subscribe"):
        ack_mode = "client" if version == "1.0" else "client-individual"
        conn.subscribe(queue_name, id="m", ack=ack_mode)
    with steps("send"):
        conn.send(queue_name, "one")
    with steps("receipt"):
        conn.send(queue_name, "two", receipt="r-two")
        listener.receipt("r-two")
    with steps("receive"):
        first = listener.message()
        assert body_of(first) == b"one"
    with steps("ack"):
        ack(first)
    two = listener.message()
    assert body_of(two) == b"two"
    if version == "1.0":
        ack(two)
        steps.skip("nack", NO_NACK_10)
    else:
        with steps("nack"):
            ack(two, nack=True)
            again = listener.message()
            assert body_of(again) == b"two"
            ack(again)
    with steps("transaction"):
        aborted = conn.begin()
        conn.send(queue_name, "aborted", transaction=aborted)
        conn.abort(aborted)
        committed = conn.begin()
        conn.send(queue_name, "committed", transaction=committed)
        conn.commit(committed, receipt="r-commit")
        listener.receipt("r-commit")
        message = listener.message()
        assert body_of(message) == b"committed"
        ack(message)
    with steps("disconnect"):
        conn.disconnect()
        assert listener.errors == []


def stompest(port: int, queue_name: str, steps: Steps) -> None:
    from stompest.config import StompConfig
    from stompest.sync import Stomp

    client = Stomp(StompConfig(f"tcp://{HOST}:{port}"))
    held: list[Any] = []

    def next_frame(command: str) -> Any:
        """The next frame of ``command``; MESSAGEs read meanwhile are kept for later."""
        for frame in held:
            if frame.command == command:
                held.remove(frame)
                return frame
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if client.canRead(0.1):
                frame = client.receiveFrame()
                assert frame.command != "ERROR", frame
                if frame.command == command:
                    return frame
                held.append(frame)
        raise TimeoutError(f"no {command}")

    with steps("connect"):
        client.connect(connectedTimeout=WAIT)
    version = client.session.version
    with steps("subscribe"):
        ack_mode = "client" if version == "1.0" else "client-individual"
        client.subscribe(queue_name, {"ack": ack_mode, "id": "m"}, receipt="r-sub")
        assert next_frame("RECEIPT").headers["receipt-id"] == "r-sub"
    with steps("send"):
        client.send(queue_name, b"one")
    with steps("receipt"):
        client.send(queue_name, b"two", receipt="r-two")
        assert next_frame("RECEIPT").headers["receipt-id"] == "r-two"
    with steps("receive"):
        first = next_frame("MESSAGE")
        assert first.body == b"one"
    with steps("ack"):
        client.ack(first)
    two = next_frame("MESSAGE")
    assert two.body == b"two"
    if version == "1.0":
        client.ack(two)
        steps.skip("nack", NO_NACK_10)
    else:
        with steps("nack"):
            client.nack(two)
            again = next_frame("MESSAGE")
            assert again.body == b"two"
            client.ack(again)
    with steps("transaction"):
        client.begin("tx-aborted")
        client.send(queue_name, b"aborted", {"transaction": "tx-aborted"})
        client.abort("tx-aborted")
        client.begin("tx-committed")
        client.send(queue_name, b"committed", {"transaction": "tx-committed"})
        client.commit("tx-committed", receipt="r-commit")
        assert next_frame("RECEIPT").headers["receipt-id"] == "r-commit"
        message = next_frame("MESSAGE")
        assert message.body == b"committed"
        client.ack(message)
    with steps("disconnect"):
        client.disconnect(receipt="bye")
        assert next_frame("RECEIPT").headers["receipt-id"] == "bye"
        client.close()


async def aiostomp(port: int, queue_name: str, steps: Steps) -> None:
    from aiostomp import AioStomp

    errors: list[Any] = []

    async def on_error(error: Any) -> None:
        errors.append(error)

    client = AioStomp(HOST, port, error_handler=on_error)
    inbox = Inbox()

    async def handler(frame: Any, body: Any) -> None:
        inbox.put(frame)

    with steps("connect"):
        await client.connect()
    with steps("subscribe"):
        # auto_ack=False: acknowledged below, by hand.
        client.subscribe(queue_name, ack="client-individual", handler=handler, auto_ack=False)
    with steps("send"):
        client.send(queue_name, "one")
    steps.skip("receipt", "aiostomp does not handle RECEIPT frames (it logs 'Unhandled frame')")
    client.send(queue_name, "two")
    with steps("receive"):
        first = await inbox.aget()
        assert body_of(first) == b"one"
    with steps("ack"):
        client.ack(first)
    with steps("nack"):
        two = await inbox.aget()
        assert body_of(two) == b"two"
        client.nack(two)
        again = await inbox.aget()
        assert body_of(again) == b"two"
        client.ack(again)
    steps.skip("transaction", "aiostomp has no transactions (no BEGIN, COMMIT or ABORT)")
    with steps("disconnect"):
        # aiostomp sends no DISCONNECT: close() ends the TCP connection, which the
        # broker takes as the end of the session (checked after this driver).
        await asyncio.sleep(0.2)  # let the last ACK leave before the socket closes
        client.close()
        assert errors == []


async def stompman(port: int, queue_name: str, steps: Steps) -> None:
    import stompman as sm

    errors: list[Any] = []
    inbox = Inbox()

    async def handler(frame: Any) -> None:
        inbox.put(frame)

    client = sm.Client(
        servers=[sm.ConnectionParameters(host=HOST, port=port, login="guest", passcode="guest")],
        on_error_frame=errors.append,
    )
    with steps("connect"):
        await client.__aenter__()
    try:
        with steps("subscribe"):
            subscription = await client.subscribe_with_manual_ack(
                queue_name, handler, ack="client-individual", receipt_timeout=WAIT
            )
        with steps("send"):
            await client.send(b"one", queue_name)
        with steps("receipt"):
            await client.send(b"two", queue_name, receipt_timeout=WAIT)
        with steps("receive"):
            first = await inbox.aget()
            assert first.body == b"one"
        with steps("ack"):
            await first.ack()
        with steps("nack"):
            two = await inbox.aget()
            assert two.body == b"two"
            await two.nack()
            again = await inbox.aget()
            assert again.body == b"two"
            await again.ack()
        with steps("transaction"):
            with pytest.raises(RuntimeError):
                async with client.begin() as aborted:
                    await aborted.send(b"aborted", queue_name)
                    raise RuntimeError("abort")  # stompman aborts on an exception
            async with client.begin() as committed:
                await committed.send(b"committed", queue_name)
            message = await inbox.aget()
            assert message.body == b"committed"
            await message.ack()
        await subscription.unsubscribe()
    finally:
        with steps("disconnect"):
            await client.__aexit__(None, None, None)
            assert errors == []


async def ours_async(port: int, queue_name: str, steps: Steps, stomp: Any) -> None:
    """stomp_proto.asyncio or stomp_proto.trio (the same API), on its own event loop."""
    async with AsyncExitStack() as stack:
        with steps("connect"):
            client = await stack.enter_async_context(stomp.connect(HOST, port))
        with steps("subscribe"):
            subscribed = client.subscribe(queue_name, ack="client-individual")
            messages = await stack.enter_async_context(subscribed)
        with steps("send"):
            await client.send(queue_name, "one")
        with steps("receipt"):
            await client.send(queue_name, "two", receipt=True)
        with steps("receive"):
            first = await messages.get(WAIT)
            assert first is not None and first.body == b"one"
        with steps("ack"):
            await client.ack(first)
        with steps("nack"):
            two = await messages.get(WAIT)
            assert two is not None and two.body == b"two"
            await client.nack(two)
            again = await messages.get(WAIT)
            assert again is not None and again.body == b"two"
            await client.ack(again)
        with steps("transaction"):
            with pytest.raises(RuntimeError):
                async with client.transaction() as aborted:
                    await client.send(queue_name, "aborted", transaction=aborted)
                    raise RuntimeError("abort")
            async with client.transaction() as committed:
                await client.send(queue_name, "committed", transaction=committed)
            message = await messages.get(WAIT)
            assert message is not None and message.body == b"committed"
            await client.ack(message)
        with steps("disconnect"):
            # UNSUBSCRIBE, then DISCONNECT and its RECEIPT.
            await stack.aclose()


def ours_threads(port: int, queue_name: str, steps: Steps) -> None:
    import stomp_proto.threads as stomp

    with ExitStack() as stack:
        with steps("connect"):
            client = stack.enter_context(stomp.connect(HOST, port))
        with steps("subscribe"):
            messages = stack.enter_context(client.subscribe(queue_name, ack="client-individual"))
        with steps("send"):
            client.send(queue_name, "one")
        with steps("receipt"):
            client.send(queue_name, "two", receipt=True)
        with steps("receive"):
            first = messages.get(WAIT)
            assert first is not None and first.body == b"one"
        with steps("ack"):
            client.ack(first)
        with steps("nack"):
            two = messages.get(WAIT)
            assert two is not None and two.body == b"two"
            client.nack(two)
            again = messages.get(WAIT)
            assert again is not None and again.body == b"two"
            client.ack(again)
        with steps("transaction"):
            with pytest.raises(RuntimeError), client.transaction() as aborted:
                client.send(queue_name, "aborted", transaction=aborted)
                raise RuntimeError("abort")
            with client.transaction() as committed:
                client.send(queue_name, "committed", transaction=committed)
            message = messages.get(WAIT)
            assert message is not None and message.body == b"committed"
            client.ack(message)
        with steps("disconnect"):
            stack.close()


def stompjs(port: int, queue_name: str, steps: Steps) -> None:
    """@stomp/stompjs under Node: tests/js/matrix.mjs plays the steps and reports them."""
    from test_stompjs_interop import JS_DIR, node

    url = f"ws://{HOST}:{port}{PATH}"
    done = subprocess.run(
        [str(node()), str(JS_DIR / "matrix.mjs"), url, queue_name],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stdout.strip().splitlines()
    report: dict[str, str] = json.loads(lines[-1]) if lines else {}
    for name in STEPS:
        if name in report:
            steps.results[name] = report[name]
    if done.returncode != 0 or any(r.startswith("failed") for r in report.values()):
        raise AssertionError(f"matrix.mjs: {done.stderr[-2000:]}")


# -- running them ---------------------------------------------------------------------------

CLIENTS: dict[str, Callable[[int, str, Steps], None]] = {
    "stomppy-Connection": functools.partial(stomppy, cls_name="Connection"),
    "stomppy-Connection10": functools.partial(stomppy, cls_name="Connection10"),
    "stomppy-Connection11": functools.partial(stomppy, cls_name="Connection11"),
    "stomppy-Connection12": functools.partial(stomppy, cls_name="Connection12"),
    "stompest": stompest,
    "aiostomp": lambda *args: asyncio.run(aiostomp(*args)),
    "stompman": lambda *args: asyncio.run(stompman(*args)),
    "stompjs": stompjs,
    "ours-asyncio": lambda port, name, steps: asyncio.run(
        ours_async(port, name, steps, importlib.import_module("stomp_proto.asyncio"))
    ),
    "ours-trio": lambda port, name, steps: importlib.import_module("trio").run(
        ours_async, port, name, steps, importlib.import_module("stomp_proto.trio")
    ),
    "ours-threads": ours_threads,
}
#: The version each client negotiates in its default configuration (docs/interop.rst).
VERSION = {
    "stomppy-Connection": "1.1",
    "stomppy-Connection10": "1.0",
    "stomppy-Connection11": "1.1",
    "stomppy-Connection12": "1.2",
    "stompest": "1.0",
    "aiostomp": "1.1",
    "stompman": "1.2",
    "stompjs": "1.2",
    "ours-asyncio": "1.2",
    "ours-trio": "1.2",
    "ours-threads": "1.2",
}
#: The PyPI package each client needs (all in the ``dev`` extra).
PACKAGES = {
    "stomppy": "stomp",
    "stompest": "stompest",
    "aiostomp": "aiostomp",
    "stompman": "stompman",
    "ours-trio": "trio",
}


def broker_state(service: ServiceLoop, broker: Broker, queue_name: str) -> tuple[int, int]:
    """(sessions open, messages left in the queue), read on the broker's own loop."""

    async def read() -> tuple[int, int]:
        return len(broker.core.sessions), broker.core.queued(queue_name)

    return service.call(read())


def play(service: ServiceLoop, client: str) -> Steps:
    """Run one client's scenario against a new broker; its steps' results."""
    steps = Steps()
    # The default options (lenient), and WebSocket at /ws for stompjs.
    broker = service.call(service.start_broker(0, False, {"websocket": PATH}))
    queue_name = f"/queue/matrix-{client}-{uuid.uuid4()}"
    # The sessions the broker opens, to read the version each one agreed.
    sessions: list[Session] = []
    open_session = broker.core.open_session

    def recording_open_session(*args: Any, **kwargs: Any) -> Session:
        sessions.append(open_session(*args, **kwargs))
        return sessions[-1]

    broker.core.open_session = recording_open_session  # type: ignore[method-assign]
    worker_error: list[BaseException] = []

    def work() -> None:
        try:
            CLIENTS[client](broker.port, queue_name, steps)
        except BaseException as exc:
            worker_error.append(exc)

    # In a thread of its own: the clients' own loops and threads never meet pytest's.
    worker = threading.Thread(target=work, name=f"matrix-{client}", daemon=True)
    worker.start()
    worker.join(90)
    if worker.is_alive():
        worker_error.append(TimeoutError("the scenario did not finish in 90 s"))
    if not worker_error and "disconnect" in steps.results:
        # The broker ends the session (at once after DISCONNECT, or at the TCP close).
        deadline = time.monotonic() + WAIT
        while (state := broker_state(service, broker, queue_name)) != (0, 0):
            if time.monotonic() > deadline:
                steps.results["disconnect"] = (
                    f"failed: after the client left, the broker has {state[0]} sessions "
                    f"and {state[1]} messages in the queue"
                )
                break
            time.sleep(0.05)
    versions = {session.connection.version for session in sessions}
    if steps.results.get("connect") == "ok" and versions != {VERSION[client]}:
        steps.results["connect"] = f"failed: versions {versions}, expected {VERSION[client]}"
    why = f"{worker_error[0]!r}"[:500] if worker_error else "the client stopped"
    for name in STEPS:
        steps.results.setdefault(name, f"failed: not reached ({why})")
    return steps


@pytest.fixture(scope="module")
def matrix() -> Iterator[Callable[[str], Steps]]:
    """Each client's scenario, played once for all its steps' tests."""
    service = ServiceLoop()
    played: dict[str, Steps] = {}

    def results(client: str) -> Steps:
        if client not in played:
            played[client] = play(service, client)
        return played[client]

    yield results
    assert service.close() == []


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_client_matrix(matrix: Callable[[str], Steps], client: str, step: str) -> None:
    package = next((p for prefix, p in PACKAGES.items() if client.startswith(prefix)), None)
    if package is not None:
        try:
            importlib.import_module(package)
        except ImportError as exc:
            # The dev extra installs every client: in CI a missing one is an error.
            if in_ci():
                pytest.fail(f"CI=true and {package} is not installed: {exc}", pytrace=False)
            pytest.skip(f"{package} is not installed (pip install -e '.[dev]')")
    if client == "stompjs":
        from test_stompjs_interop import node

        node()  # skips, or fails under CI=true, without Node.js
    result = matrix(client).results[step]
    if result.startswith("skip: "):
        pytest.skip(f"{client} cannot do this step: {result[6:]}")
    assert result == "ok", result
