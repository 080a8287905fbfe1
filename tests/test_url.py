"""Connection URLs: parsed in one place, mapped onto the connect() options, said once.

The failover form and its option names and units (milliseconds) are ActiveMQ's
failover transport's; options left out keep stomp_proto's defaults.
"""

from __future__ import annotations

import logging
import re
import ssl
from typing import Any

import pytest

import stomp_proto
from stomp_proto import Backoff, BrokerURL
from stomp_proto._client._options import ConnectOptions


def build(host: str | None = None, port: int | None = None, **options: Any) -> ConnectOptions:
    return ConnectOptions.build(host, port, options)  # type: ignore[arg-type]


# -- the forms of a URL ------------------------------------------------------------------


def test_stomp_url_maps_to_host_port_login_passcode_vhost() -> None:
    options = build("stomp://alice:s%40cret@broker.example:61620/prod")
    assert (options.host, options.port) == ("broker.example", 61620)
    assert options.hosts == (("broker.example", 61620),)
    assert (options.login, options.passcode, options.vhost) == ("alice", "s@cret", "prod")
    assert options.ssl is None and options.websocket is None
    assert options.reconnect is None


def test_defaults_where_the_url_is_silent() -> None:
    options = build("stomp://broker")
    assert (options.port, options.login, options.passcode, options.vhost) == (
        61613,
        None,
        None,
        "/",
    )
    assert build("stomp://broker/").vhost == "/"
    assert build("stomp://broker/%2F").vhost == "/"  # RabbitMQ's default vhost, spelled out


def test_stomp_ssl_gets_a_verifying_context_or_the_one_given() -> None:
    options = build("stomp+ssl://broker:61614")
    assert isinstance(options.ssl, ssl.SSLContext)
    assert options.ssl.verify_mode is ssl.CERT_REQUIRED
    mine = ssl.create_default_context()
    assert build("stomp+ssl://broker", ssl=mine).ssl is mine  # the URL says TLS, ssl says how


def test_websocket_urls_keep_their_path() -> None:
    options = build("ws://127.0.0.1:15674/ws")
    assert (options.host, options.port, options.websocket, options.ssl) == (
        "127.0.0.1",
        15674,
        "/ws",
        None,
    )
    secure = build("wss://broker/stomp")
    assert (secure.port, secure.websocket) == (443, "/stomp")
    assert secure.ssl is not None
    assert build("ws://broker").websocket == "/"


def test_ipv6_literal() -> None:
    assert build("stomp://[::1]:61613").hosts == (("::1", 61613),)


def test_failover_url_in_activemq_form() -> None:
    options = build(
        "failover:(stomp://u:p@h1:61613,stomp://u:p@h2:61614)"
        "?randomize=false&initialReconnectDelay=100&maxReconnectDelay=2000"
        "&backOffMultiplier=1.5&maxReconnectAttempts=7"
    )
    assert options.hosts == (("h1", 61613), ("h2", 61614))
    assert (options.host, options.port) == ("h1", 61613)
    assert options.randomize is False
    assert options.login == "u" and options.passcode == "p"
    assert options.reconnect == Backoff(initial=0.1, maximum=2.0, factor=1.5, attempts=7)


def test_failover_options_left_out_keep_our_defaults() -> None:
    options = build("failover:stomp://h1,stomp://h2")  # without parentheses, too
    assert options.hosts == (("h1", 61613), ("h2", 61613))
    assert options.reconnect == Backoff()
    assert options.randomize is False
    forever = build("failover:(stomp://h1)?maxReconnectAttempts=-1&useExponentialBackOff=false")
    assert forever.reconnect == Backoff(attempts=None, factor=1.0)
    assert build("failover:(stomp://h1,stomp://h2)?randomize=true").randomize is True


def test_failover_url_takes_every_backoff_option() -> None:
    # The options ActiveMQ's transport lacks keep its units: milliseconds for times.
    options = build(
        "failover:(stomp://h1,stomp://h2)?jitter=0.25&heldAfter=1500&resetAfter=20000"
        "&errorAttempts=5&initialReconnectDelay=50"
    )
    assert options.reconnect == Backoff(
        initial=0.05, jitter=0.25, held_after=1.5, reset_after=20.0, error_attempts=5
    )
    for bad, named in [
        ("jitter=1", "'jitter' is a fraction"),
        ("errorAttempts=2.5", "'errorAttempts' is a whole number"),
        ("heldAfter=-1", "'heldAfter' is negative"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            BrokerURL.parse(f"failover:(stomp://h1)?{bad}")


def test_failover_url_sets_the_attempt_bound_and_leaving_a_silent_broker() -> None:
    options = build("failover:(stomp://h1,stomp://h2)?connectTimeout=1500&failoverOnTimeout=false")
    assert options.connect_timeout == 1.5
    assert options.failover_on_timeout is False
    assert options.leaves_on_timeout is False
    # Left out: a few seconds per attempt, and leaving a silent broker, as it has
    # several addresses and a reconnect schedule.
    options = build("failover:(stomp://h1,stomp://h2)")
    assert (options.connect_timeout, options.leaves_on_timeout) == (5.0, True)
    assert build("failover:(stomp://h1)").leaves_on_timeout is False  # nowhere else to go
    for bad, named in [
        ("connectTimeout=0", "'connectTimeout' must be positive"),
        ("connectTimeout=soon", "'connectTimeout' is not a number"),
        ("failoverOnTimeout=yes", "'failoverOnTimeout' is true or false"),
    ]:
        with pytest.raises(ValueError, match=re.escape(named)):
            BrokerURL.parse(f"failover:(stomp://h1)?{bad}")


def test_connect_timeout_and_failover_on_timeout_are_checked() -> None:
    hosts = [("h1", 1), ("h2", 2)]
    assert build(hosts=hosts).leaves_on_timeout is False  # no reconnect: nothing to fail over
    assert build(hosts=hosts, reconnect=Backoff()).leaves_on_timeout is True
    assert (
        build(hosts=hosts, reconnect=Backoff(), failover_on_timeout=False).leaves_on_timeout
        is False
    )
    assert build(reconnect=Backoff(), failover_on_timeout=True).leaves_on_timeout is True
    with pytest.raises(ValueError, match="give reconnect=Backoff"):
        build(hosts=hosts, failover_on_timeout=True)
    with pytest.raises(TypeError, match="failover_on_timeout"):
        build(failover_on_timeout="yes")
    with pytest.raises(ValueError, match="connect_timeout must be positive"):
        build(connect_timeout=0)
    with pytest.raises(TypeError, match="connect_timeout"):
        build(connect_timeout="5")


def test_several_hosts_in_one_address_point_to_failover() -> None:
    with pytest.raises(ValueError, match=re.escape("failover:(stomp://host1:61613,")):
        BrokerURL.parse("stomp://h1,h2:61613")


def test_a_passcode_of_another_type_is_named_by_its_type_only() -> None:
    with pytest.raises(TypeError) as caught:
        build("127.0.0.1", 61613, passcode=1234)
    assert str(caught.value) == (
        "connect() option passcode must be a str or None, not int (the value is not shown)"
    )


# -- said once ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "keywords", "named"),
    [
        ("stomp://alice@h", {"login": "bob"}, "'login'"),
        ("stomp://a:pw@h", {"passcode": "other"}, "'passcode'"),
        ("stomp://h/prod", {"vhost": "test"}, "'vhost'"),
        ("ws://h/ws", {"websocket": "/other"}, "'websocket'"),
        ("stomp://h", {"hosts": [("x", 1)]}, "'hosts'"),
        ("failover:(stomp://h)", {"reconnect": Backoff()}, "'reconnect'"),
        ("failover:(stomp://h)?randomize=true", {"randomize": False}, "'randomize'"),
        ("stomp://h", {"ssl": ssl.create_default_context()}, "not TLS"),
    ],
)
def test_a_keyword_that_says_again_what_the_url_says_is_an_error(
    url: str, keywords: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        build(url, **keywords)


def test_keywords_the_url_does_not_set_are_taken() -> None:
    options = build("stomp://h", login="carol", vhost="v", heartbeat=(0, 0), timeout=3.0)
    assert (options.login, options.vhost, options.heartbeat, options.timeout) == (
        "carol",
        "v",
        (0, 0),
        3.0,
    )
    # a single-address URL says nothing of reconnecting: the keyword may
    assert build("stomp://h", reconnect=Backoff(initial=1)).reconnect == Backoff(initial=1)


def test_a_url_with_a_port_argument_is_an_error() -> None:
    with pytest.raises(ValueError, match="port"):
        build("stomp://h:61613", 61613)


def test_hosts_with_host_or_port_is_an_error() -> None:
    with pytest.raises(ValueError, match="hosts"):
        build("h1", hosts=[("h2", 61613)])
    with pytest.raises(ValueError, match="hosts"):
        build(None, 61613, hosts=[("h2", 61613)])


@pytest.mark.parametrize(
    ("hosts", "kind", "named"),
    [
        ([], ValueError, "empty"),
        ("h1:61613", TypeError, "pairs"),
        ([("h1",)], TypeError, "entry 1"),
        ([("h1", 1), ("", 2)], ValueError, "entry 2: the host"),
        ([("h1", 70000)], ValueError, "entry 1: the port"),
        ([("h1", "61613")], ValueError, "entry 1: the port"),
    ],
)
def test_bad_hosts(hosts: Any, kind: type[Exception], named: str) -> None:
    with pytest.raises(kind, match=named):
        build(hosts=hosts)


# -- bad URLs: a ValueError that names the part -----------------------------------------------


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://h", "scheme 'http'"),
        ("stomp://", "host is missing"),
        ("stomp://h:port", "the port is not a number"),
        ("stomp://h:0", "port '0'"),
        ("stomp://h:99999", "port '99999'"),
        ("stomp://:pw@h", "login"),
        ("stomp://h/a/b", "virtual host"),
        ("stomp://h?x=1", "query"),
        ("stomp://h#frag", "fragment"),
        ("stomp://[::1", "IPv6"),
        ("failover:(stomp://h1,stomp://h2", "closing"),
        ("failover:()", "empty"),
        ("failover:(stomp://h1,,stomp://h2)", "empty entry"),
        ("failover:(stomp://h1,http://h2)", "failover address 2: scheme"),
        ("failover:(stomp://h1,stomp+ssl://h2)", "address 2: its tls"),
        ("failover:(stomp://a:b@h1,stomp://h2)", "address 2: its login"),
        ("failover:(stomp://h1)?backup=true", "'backup' is not supported"),
        ("failover:(stomp://h1)?randomize=maybe", "'randomize' is true or false"),
        ("failover:(stomp://h1)?initialReconnectDelay=soon", "'initialReconnectDelay'"),
        ("failover:(stomp://h1)?initialReconnectDelay=-5", "negative"),
        ("failover:(stomp://h1)?maxReconnectAttempts=1.5", "'maxReconnectAttempts'"),
        ("failover:(stomp://h1)?randomize", "has no value"),
        ("failover:(stomp://h1)?randomize=true&randomize=false", "twice"),
        (
            "failover:(stomp://h1)?initialReconnectDelay=500&maxReconnectDelay=100",
            "'maxReconnectDelay' is shorter",
        ),
        ("failover:(stomp://h1)?useExponentialBackOff=false&backOffMultiplier=3", "contradict"),
        ("failover:(stomp://h1)x", "only '?options'"),
        ("broker:61613", "of the form"),
    ],
)
def test_a_bad_url_names_the_part(url: str, named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        BrokerURL.parse(url if "://" in url or url.startswith("failover:") else "stomp:" + url)


def test_a_non_string_url_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        BrokerURL.parse(b"stomp://h")  # type: ignore[arg-type]


# -- the passcode never shows --------------------------------------------------------------------


SECRET = "hunter2-xyzzy"


def test_the_passcode_is_in_no_repr(caplog: pytest.LogCaptureFixture) -> None:
    url = f"failover:(stomp://alice:{SECRET}@h1,stomp://alice:{SECRET}@h2)"
    parsed = BrokerURL.parse(url)
    assert parsed.passcode == SECRET
    options = build(url)
    assert options.passcode == SECRET
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("stomp_proto").info("connecting with %r and %r", parsed, options)
    for text in (repr(parsed), str(parsed), repr(options), caplog.text):
        assert SECRET not in text
        assert "alice" in text or text == caplog.text  # the rest is still there


@pytest.mark.parametrize(
    "url",
    [
        f"stomp://alice:{SECRET}@h:bad",
        f"stomp://alice:{SECRET}@h/a/b",
        f"stomp://alice:{SECRET}@h?x=1",
        f"failover:(stomp://alice:{SECRET}@h1,stomp://bob:{SECRET}@h2)",
        f"failover:(stomp://alice:{SECRET}@h1)?nope=1",
        f"ftp://alice:{SECRET}@h",
    ],
)
def test_the_passcode_is_in_no_error(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        BrokerURL.parse(url)
    assert SECRET not in str(caught.value)


def test_the_public_face() -> None:
    assert stomp_proto.BrokerURL is BrokerURL
    parsed = BrokerURL.parse("stomp://u:p@h:1/v")
    assert parsed.options() == {"hosts": [("h", 1)], "login": "u", "passcode": "p", "vhost": "v"}
