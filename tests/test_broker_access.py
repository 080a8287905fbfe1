"""The embedded broker's authorization: per-login destination patterns, client certificates
(mutual TLS) and the failed-login throttle per client address.

A refusal is an ERROR that names the destination and not the rule; the throttle
is driven by the clock the test gives (``handle_timer``), so nothing here times
anything.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import subprocess
from pathlib import Path

import pytest
from test_broker_core import Client, Net
from timeouts import scaled

from stomp_proto import (
    Begin,
    ClientConnection,
    Connect,
    Connected,
    Error,
    Event,
    Message,
    Receipt,
    Send,
    Subscribe,
)
from stomp_proto._cli import broker_tls_context, build_parser
from stomp_proto.broker import Broker, BrokerCore, LoginThrottle, load_permissions
from stomp_proto.broker._throttle import LOGIN_BURST, MAX_ADDRESSES

pytestmark = pytest.mark.timeout(60)

USERS = {"ann": "a", "bob": "b", "eve": "e"}
PERMISSIONS = {
    # ann publishes orders and reads every queue; bob reads prices only; eve has no entry.
    "ann": {"write": "/queue/orders", "read": "/queue/.*"},
    "bob": {"read": "/topic/prices"},
}


def _refusal(client: object) -> Error:
    (error,) = client.take(Error)  # type: ignore[attr-defined]
    return error  # type: ignore[no-any-return]


# -- permissions ---------------------------------------------------------------------


def test_a_login_does_what_its_patterns_allow() -> None:
    net = Net(users=USERS, permissions=PERMISSIONS)  # type: ignore[arg-type]
    ann = net.connect(login="ann", passcode="a")
    bob = net.connect(login="bob", passcode="b")
    ann.subscribe("/queue/orders")
    bob.subscribe("/topic/prices")
    ann.send(Send("/queue/orders", b"one", receipt="r"))
    assert ann.bodies() == [b"one"] and ann.take(Receipt)
    assert not ann.closed and not bob.closed


@pytest.mark.parametrize(
    ("login", "frame", "verb"),
    [
        ("ann", Send("/queue/ordersX", b"x", receipt="r1"), "send to"),  # the whole name
        ("ann", Subscribe("/topic/prices", id="1", receipt="r1"), "subscribe to"),
        ("bob", Send("/topic/prices", b"x", receipt="r1"), "send to"),  # no write pattern
        ("eve", Subscribe("/queue/orders", id="1", receipt="r1"), "subscribe to"),  # no entry
    ],
)
def test_a_frame_beyond_the_patterns_gets_an_error_naming_the_destination(
    login: str, frame: Send | Subscribe, verb: str
) -> None:
    net = Net(users=USERS, permissions=PERMISSIONS)  # type: ignore[arg-type]
    client = net.connect(login=login, passcode=USERS[login])
    client.send(frame)
    error = _refusal(client)
    assert error.message == "access refused"
    assert error.receipt_id == "r1"
    # The destination, and not the rule (no pattern is shown).
    assert error.body.decode() == f"not allowed to {verb} {frame.destination!r}"
    assert client.closed
    assert net.core.counters.refused["access_refused"] == 1


def test_a_send_in_a_transaction_is_checked_when_sent() -> None:
    net = Net(users=USERS, permissions=PERMISSIONS)  # type: ignore[arg-type]
    bob = net.connect(login="bob", passcode="b")
    bob.send(Begin("t"))
    bob.send(Send("/queue/orders", b"x", transaction="t"))
    assert _refusal(bob).message == "access refused"


def test_bad_permissions_are_refused_when_the_broker_is_made() -> None:
    with pytest.raises(ValueError, match="'ann': bad read pattern"):
        BrokerCore(permissions={"ann": {"read": "("}})
    with pytest.raises(ValueError, match="unknown"):
        BrokerCore(permissions={"ann": {"configure": ".*"}})  # type: ignore[typeddict-unknown-key]


def test_permissions_load_from_a_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "permissions.toml"
    path.write_text(
        '# who may do what\n[ann]\nwrite = "/queue/orders"\nread = "/queue/.*"\n'
        '[bob]\nread = "/topic/prices"\n'
    )
    assert load_permissions(path) == PERMISSIONS
    args = build_parser().parse_args(["broker", "--permissions", str(path)])
    assert args.permissions == PERMISSIONS
    for bad in ('ann = "x"\n', "[ann]\nread = 3\n", "[ann\n", '[ann]\nread = "("\n'):
        path.write_text(bad)
        with pytest.raises(ValueError, match=str(path) + "|ann"):
            load_permissions(path)


# -- the failed-login throttle -----------------------------------------------------------


def test_the_throttle_lets_a_burst_through_then_one_failure_per_interval() -> None:
    throttle = LoginThrottle(2.0)
    for _ in range(LOGIN_BURST):
        assert throttle.ready_at("10.0.0.1", 0.0) == 0.0
        throttle.failed("10.0.0.1", 0.0)
    assert throttle.ready_at("10.0.0.1", 0.0) == 0.5
    assert throttle.ready_at("10.0.0.2", 0.0) == 0.0  # another address
    assert throttle.ready_at("10.0.0.1", 0.5) == 0.5
    throttle.failed("10.0.0.1", 0.5)
    assert throttle.ready_at("10.0.0.1", 0.5) == 1.0
    # Left alone, the bucket fills again.
    assert throttle.ready_at("10.0.0.1", 100.0) == 100.0


def test_the_throttle_remembers_a_bounded_number_of_addresses() -> None:
    throttle = LoginThrottle(1.0)
    for n in range(MAX_ADDRESSES + 50):
        throttle.failed(f"10.{n >> 16}.{(n >> 8) & 255}.{n & 255}", float(n))
    assert len(throttle._buckets) <= MAX_ADDRESSES


def _client_from(net: Net, address: str) -> Client:
    client = Client(net, net.core.open_session(address=address))
    net.clients[client.session] = client
    return client


def _connect_from(net: Net, address: str, passcode: str, now: float) -> list[Event]:
    """A CONNECT as ann from ``address`` at ``now``; the events it got back at once."""
    client = _client_from(net, address)
    client.session.handle_timer(now)
    client.send(Connect(host="/", login="ann", passcode=passcode))
    return client.events


def test_after_a_burst_of_failures_an_address_waits_its_turn_others_do_not() -> None:
    net = Net(users=USERS, failed_login_rate=1.0)
    for _ in range(LOGIN_BURST):
        error = _connect_from(net, "10.0.0.1", "wrong", 0.0)[0]
        assert isinstance(error, Error) and error.message == "Bad CONNECT: login failed"
    # Even the right passcode is not looked at before the address's turn comes.
    client = _client_from(net, "10.0.0.1")
    session = client.session
    session.handle_timer(0.0)
    client.send(Connect(host="/", login="ann", passcode="a"))
    net.feed(client, b"SUBSCRIBE\ndestination:/queue/x\nid:1\n\n\x00")  # pipelined: waits too
    assert client.events == [] and net.core.destinations() == {}
    session.handle_timer(0.0)  # it learns when the pipelined frame started
    assert session.get_timer() == 1.0
    session.handle_timer(1.0)
    net.route(net.core.process(session))
    assert isinstance(client.events[0], Connected)
    assert net.core.destinations() == {"/queue/x": (0, 0, 1)}
    # Another address was never slowed.
    assert isinstance(_connect_from(net, "10.0.0.2", "a", 0.0)[0], Connected)


def test_a_throttled_connect_still_has_its_connect_deadline() -> None:
    net = Net(users=USERS, failed_login_rate=0.01, connect_timeout=5.0)
    for _ in range(LOGIN_BURST):
        _connect_from(net, "10.0.0.1", "wrong", 0.0)
    client = _client_from(net, "10.0.0.1")
    session = client.session
    session.handle_timer(0.0)
    client.send(Connect(host="/", login="ann", passcode="a"))
    assert session.get_timer() == 5.0
    session.handle_timer(5.0)
    net.route(net.core.process(session))
    assert _refusal(client).message == "CONNECT timeout"


def test_failed_metrics_logins_count_towards_the_throttle() -> None:
    async def body() -> None:
        async with Broker(users=USERS, failed_login_rate=0.01) as broker:
            wrong = "Basic " + base64.b64encode(b"ann:wrong").decode()
            for _ in range(LOGIN_BURST):
                reader, writer = await asyncio.open_connection(broker.host, broker.port)
                writer.write(f"GET /metrics HTTP/1.1\r\nAuthorization: {wrong}\r\n\r\n".encode())
                assert (await reader.read()).startswith(b"HTTP/1.1 401 ")
                writer.close()
            throttle = broker.core.login_throttle
            assert throttle is not None
            now = asyncio.get_running_loop().time()
            assert throttle.ready_at("127.0.0.1", now) > now

    asyncio.run(body())


def test_the_throttle_can_be_turned_off() -> None:
    net = Net(users=USERS, failed_login_rate=None)
    assert net.core.login_throttle is None
    for _ in range(3 * LOGIN_BURST):
        assert isinstance(_connect_from(net, "10.0.0.1", "wrong", 0.0)[0], Error)
    assert isinstance(_connect_from(net, "10.0.0.1", "a", 0.0)[0], Connected)


# -- mutual TLS --------------------------------------------------------------------------


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by it."""
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    d = tmp_path_factory.mktemp("pki")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem",
             "-days", "1", "-subj", "/CN=test CA",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    # Python 3.13's default contexts verify with VERIFY_X509_STRICT, which refuses a CA
    # certificate without keyUsage and a certificate it signed that does not name its key
    # (authorityKeyIdentifier); real CAs' certificates have both.
    strict = "basicConstraints=CA:FALSE\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    for name, extension in (
        ("server", strict + "subjectAltName=IP:127.0.0.1"),
        ("client", strict + "extendedKeyUsage=clientAuth"),
    ):
        _openssl("req", *ec, "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.csr",
                 "-subj", f"/CN={name}")  # fmt: skip
        (d / f"{name}.ext").write_text(extension + "\n")
        _openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.pem",
                 "-CAkey", f"{d}/ca.key", "-CAcreateserial", "-days", "1",
                 "-extfile", f"{d}/{name}.ext", "-out", f"{d}/{name}.pem")  # fmt: skip
    return d


async def _handshake(port: int, context: ssl.SSLContext) -> Event | None:
    """CONNECT over TLS; the first event back (``None`` if the broker closed first)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    except (ssl.SSLError, ConnectionError):
        return None
    conn = ClientConnection()
    writer.write(conn.send(Connect(host="/")))
    try:
        while (event := conn.next_event()) is None:
            conn.receive_data(await asyncio.wait_for(reader.read(4096), 10) or None)
    except (ssl.SSLError, ConnectionError):
        event = None
    finally:
        writer.close()
    return None if event is None or not isinstance(event, Connected | Message) else event


def test_with_cafile_only_clients_with_a_certificate_of_that_ca_get_in(pki: Path) -> None:
    args = build_parser().parse_args(
        ["broker", "--certfile", str(pki / "server.pem"), "--keyfile", str(pki / "server.key"),
         "--cafile", str(pki / "ca.pem")]
    )  # fmt: skip
    server = broker_tls_context(args)
    assert server is not None and server.verify_mode is ssl.CERT_REQUIRED
    with_cert = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with_cert.load_cert_chain(pki / "client.pem", pki / "client.key")
    without = ssl.create_default_context(cafile=str(pki / "ca.pem"))

    async def body() -> None:
        async with Broker(ssl=server) as broker:
            assert isinstance(await _handshake(broker.port, with_cert), Connected)
            assert await _handshake(broker.port, without) is None

    asyncio.run(body())


def test_cafile_without_certfile_is_a_usage_error() -> None:
    from test_cli import cli

    result = cli("broker", "--cafile", "ca.pem")
    assert result.returncode == 2 and "--cafile needs --certfile" in result.stderr


def test_over_tcp_a_throttled_connect_is_answered_when_its_turn_comes() -> None:
    async def body() -> None:
        # One token a second (scaled): the burst and the check below must fit in a
        # token's time, or the bucket has refilled and the next login does not wait.
        rate = 1 / scaled(1.0)
        async with Broker(users=USERS, failed_login_rate=rate, metrics=False) as broker:

            async def connect(passcode: str) -> Event | None:
                reader, writer = await asyncio.open_connection(broker.host, broker.port)
                conn = ClientConnection()
                writer.write(conn.send(Connect(host="/", login="ann", passcode=passcode)))
                while (event := conn.next_event()) is None:
                    conn.receive_data(await asyncio.wait_for(reader.read(4096), 20) or None)
                writer.close()
                return event

            for _ in range(LOGIN_BURST):
                assert isinstance(await connect("wrong"), Error)
            throttle = broker.core.login_throttle
            assert throttle is not None
            now = asyncio.get_running_loop().time()
            assert throttle.ready_at("127.0.0.1", now) > now  # the next one waits
            assert isinstance(await connect("a"), Connected)

    asyncio.run(body())
