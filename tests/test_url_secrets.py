"""A URL's credentials never show: not in a repr, an error, a log line, the CLI's output.

A generated secret stands in every place of the user info that can hold it (the
login, and a passcode with a raw ``/``, ``@``, ``:``, ``%``, ``?``, ``#``, ``,``
or ``)``), and each URL goes through everything that reads URLs: the parser, the
clients' ``connect()`` (to a port where nothing listens), the command line and the
Spark ``url`` option.  Every text that comes out is searched for the secret.

Where the URL is well formed the secret must also come through whole: the user
info ends at the last ``@``, as ``urllib.parse`` reads an authority.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import subprocess
import sys
from urllib.parse import quote, unquote

import pytest

from stomp_proto import BrokerURL, ConnectionLost
from stomp_proto.threads import connect

#: The characters a password may hold raw in a URL that RFC 3986 reserves elsewhere.
RAW = ["/", "@", ":", "%", "?", "#", ",", ")", "%41", "@@", "a:b@c/d"]


def secret() -> str:
    return "S3CR" + secrets.token_hex(6)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def forms(port: int) -> list[tuple[str, str, str | None, str | None]]:
    """(url, the secret in it, the login and passcode it must parse to)."""
    rows: list[tuple[str, str, str | None, str | None]] = []
    for raw in RAW:
        password = secret()[:6] + raw + secret()
        # Written raw, a '%' followed by two hex digits is still an escape.
        decoded = unquote(password)
        rows.append((f"stomp://user:{password}@127.0.0.1:{port}/", password, "user", decoded))
        rows.append(
            (
                f"failover:(stomp://user:{password}@127.0.0.1:{port},"
                f"stomp://user:{password}@127.0.0.1:{port})",
                password,
                "user",
                decoded,
            )
        )
        quoted = quote(password, safe="")
        rows.append((f"stomp://user:{quoted}@127.0.0.1:{port}", password, "user", password))
    login = secret()
    rows.append((f"stomp://{login}:pw@127.0.0.1:{port}", login, login, "pw"))
    rows.append((f"stomp://{login}@127.0.0.1:{port}", login, login, None))
    return rows


def broken(port: int) -> list[tuple[str, str]]:
    """URLs with a mistake somewhere, and the secret each holds."""
    rows = []
    for raw in RAW:
        password = secret()[:6] + raw + secret()
        rows += [
            (f"stomp://user:{password}@127.0.0.1:bad", password),
            (f"stomp://user:{password}@127.0.0.1:{port}/a/b", password),
            (f"stomp://user:{password}@127.0.0.1:{port}?x=1", password),
            (f"stomp://user:{password}@127.0.0.1,h2:{port}", password),
            (f"ftp://user:{password}@127.0.0.1", password),
            (f"failover:(stomp://user:{password}@h1)?nope=1", password),
            (f"failover:(stomp://user:{password}@h1,stomp://other:{password}@h2)", password),
        ]
        if "@" not in raw:
            # The '@' forgotten: the passcode sits where a host and port would.  (With
            # an '@' in the passcode, what follows it is a host name: a valid URL.)
            rows.append((f"stomp://user:{password}", password))
    return rows


@pytest.mark.parametrize("index", range(len(forms(1))))
def test_every_secret_parses_whole_and_shows_nowhere(
    index: int, caplog: pytest.LogCaptureFixture
) -> None:
    port = closed_port()
    url, hidden, login, passcode = forms(port)[index]
    parsed = BrokerURL.parse(url)
    assert (parsed.login, parsed.passcode) == (login, passcode)
    assert parsed.hosts[0] == ("127.0.0.1", port)
    texts = [repr(parsed), str(parsed)] if login != hidden else []
    with caplog.at_level(logging.DEBUG), pytest.raises(ConnectionLost) as caught:
        connect(url, timeout=2.0).close()  # nothing listens: connect() fails
    texts += [str(caught.value), repr(caught.value), caplog.text]
    for text in texts:
        assert hidden not in text, text
        assert passcode is None or passcode not in text, text


@pytest.mark.parametrize("index", range(len(broken(1))))
def test_a_bad_url_quotes_no_secret(index: int) -> None:
    url, hidden = broken(closed_port())[index]
    with pytest.raises(ValueError) as caught:
        BrokerURL.parse(url)
    assert hidden not in str(caught.value)
    assert "user" not in str(caught.value)  # nothing of the user info at all


def test_the_spark_url_option_quotes_no_secret() -> None:
    pytest.importorskip("pyspark")
    from stomp_proto.spark._options import ConnectionSettings

    port = closed_port()
    for url, hidden, login, passcode in forms(port):
        settings = ConnectionSettings.from_options({"url": url})
        assert settings.passcode == passcode
        if hidden != login:  # a repr shows the login, never the passcode
            assert hidden not in repr(settings)
        with pytest.raises(OSError) as failed:
            settings.open_socket()
        assert hidden not in str(failed.value)
    for url, hidden in broken(port):
        with pytest.raises(ValueError) as caught:
            ConnectionSettings.from_options({"url": url})
        assert hidden not in str(caught.value)


def test_the_command_line_prints_no_secret() -> None:
    port = closed_port()
    rows = [(url, hidden) for url, hidden, *_ in forms(port)[:6]] + broken(port)[:8]
    for url, hidden in rows:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "stomp_proto",
                "send",
                "--host",
                url,
                "--timeout",
                "2",
                "/queue/a",
                "body",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        assert done.returncode != 0
        assert hidden not in done.stdout + done.stderr, done.stderr
