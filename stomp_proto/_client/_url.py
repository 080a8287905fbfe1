"""Connection URLs: one parser for the clients, the CLI and the Spark options.

A URL is another way to write the options of ``connect()``, never a second
source of truth: :meth:`BrokerURL.options` gives the keyword options it stands
for, and :func:`merge_url` refuses a keyword that says again what the URL
already says.

* ``stomp://login:passcode@host:61613/vhost`` - STOMP over TCP; the path is
  the virtual host (the CONNECT ``host`` header), percent-decoded.
* ``stomp+ssl://...`` - the same over TLS.
* ``ws://host:15674/ws``, ``wss://...`` - STOMP over a WebSocket at that path.
* ``failover:(stomp://h1:61613,stomp://h2:61613)?randomize=false&initialReconnectDelay=100``
  - several brokers (ActiveMQ's form, also without the parentheses), and the
  reconnect schedule in ActiveMQ's option names and units (milliseconds), with
  ``connectTimeout`` and ``failoverOnTimeout`` for the client's own options.

Every error is a ValueError that names the part at fault; no error message
and no repr ever holds the passcode.
"""

from __future__ import annotations

import re
import ssl as _ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from .._public import present_as
from ._backoff import Backoff

__all__ = ["BrokerURL", "merge_url"]

#: Schemes of one broker address: (TLS, WebSocket, default port).
_SCHEMES: dict[str, tuple[bool, bool, int]] = {
    "stomp": (False, False, 61613),
    "stomp+ssl": (True, False, 61614),
    "ws": (False, True, 80),
    "wss": (True, True, 443),
}

#: ActiveMQ's failover options that map onto ours (the rest are refused by name).
FAILOVER_OPTIONS = (
    "initialReconnectDelay",
    "maxReconnectDelay",
    "useExponentialBackOff",
    "backOffMultiplier",
    "maxReconnectAttempts",
    "randomize",
)

#: The rest of :class:`Backoff`, which ActiveMQ's failover transport does not have:
#: each option's field (times in milliseconds, as ActiveMQ's delays are).
EXTRA_FAILOVER_OPTIONS = {
    "jitter": "jitter",
    "heldAfter": "held_after",
    "resetAfter": "reset_after",
    "errorAttempts": "error_attempts",
}

#: Options of a failover URL for ``connect()`` options of the client itself:
#: ``connect_timeout`` (in milliseconds) and ``failover_on_timeout``.
CLIENT_FAILOVER_OPTIONS = ("connectTimeout", "failoverOnTimeout")

#: The scheme of one broker address, up to its "://".
_SCHEME = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")

#: What follows the user info: host and port, path, query, fragment.
_AFTER_USERINFO = re.compile(
    r"(?P<hostport>[^/?#]*)(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?(?:#(?P<fragment>.*))?\Z",
    re.DOTALL,
)

#: Where a failover list's next address starts: a comma before "scheme://" (or before
#: another comma or the end: an empty entry).  A comma anywhere else belongs to the
#: address (a passcode may hold one).
_NEXT_ADDRESS = re.compile(r",(?=\s*(?:[A-Za-z][A-Za-z0-9+.-]*://|,|\Z))")


def looks_like_url(text: str) -> bool:
    """Whether a ``host`` argument is a URL rather than a host name."""
    return "://" in text or text.lower().startswith("failover:")


@dataclass(frozen=True, slots=True)
class BrokerURL:
    """A parsed connection URL; :meth:`parse` makes one, :meth:`options` uses it.

    Only what the URL says is set; the rest is ``None`` (the client's default).
    """

    #: The broker addresses, in the order written.
    hosts: tuple[tuple[str, int], ...]
    #: Whether the addresses use TLS (``stomp+ssl``, ``wss``).
    tls: bool = False
    #: The WebSocket path (``ws``, ``wss``), else None.
    websocket: str | None = None
    #: The login before ``@``, percent-decoded.
    login: str | None = None
    #: The passcode after ``login:``; left out of the repr (options get logged).
    passcode: str | None = field(default=None, repr=False)
    #: The virtual host from the path of a ``stomp`` URL, else None.
    vhost: str | None = None
    #: The reconnect schedule of a ``failover:`` URL, else None.
    reconnect: Backoff | None = None
    #: Whether a ``failover:`` URL asked for a random order.
    randomize: bool | None = None
    #: A ``failover:`` URL's ``connectTimeout``, in seconds.
    connect_timeout: float | None = None
    #: A ``failover:`` URL's ``failoverOnTimeout``.
    failover_on_timeout: bool | None = None

    @classmethod
    def parse(cls, url: str) -> BrokerURL:
        """Parse ``url``; a ValueError names the part that is wrong."""
        if not isinstance(url, str):
            raise TypeError(f"a connection URL is a str, not {type(url).__name__}")
        text = url.strip()
        if text.lower().startswith("failover:"):
            return _parse_failover(text[len("failover:") :])
        return _parse_address(text, where="URL")

    def options(self, ssl_context: _ssl.SSLContext | None = None) -> dict[str, Any]:
        """The ``connect()`` keyword options this URL stands for (``hosts`` included).

        A TLS URL gets ``ssl_context``, or the system's default context.
        """
        options: dict[str, Any] = {"hosts": list(self.hosts)}
        if self.tls:
            options["ssl"] = ssl_context or _ssl.create_default_context()
        if self.websocket is not None:
            options["websocket"] = self.websocket
        if self.login is not None:
            options["login"] = self.login
        if self.passcode is not None:
            options["passcode"] = self.passcode
        if self.vhost is not None:
            options["vhost"] = self.vhost
        if self.reconnect is not None:
            options["reconnect"] = self.reconnect
        for name in ("randomize", "connect_timeout", "failover_on_timeout"):
            value = getattr(self, name)
            if value is not None:
                options[name] = value
        return options


def merge_url(url: str, keywords: Mapping[str, Any]) -> dict[str, Any]:
    """The options of ``url`` together with ``keywords``; a ValueError if they overlap.

    ``ssl`` is the one keyword a TLS URL takes along: the URL says "TLS", the
    context says how (certificates).  A plain URL with ``ssl`` contradicts it.
    """
    parsed = BrokerURL.parse(url)
    context = keywords.get("ssl")
    if context is not None and not parsed.tls:
        raise ValueError(
            "the URL's scheme is not TLS but an ssl context was given: "
            "use stomp+ssl:// or wss:// with it"
        )
    options = parsed.options(context)
    for name in keywords:
        if name in options and name != "ssl":
            raise ValueError(f"{name!r} is given both by the URL and as a keyword: give it once")
    return {**keywords, **options}


def _parse_failover(rest: str) -> BrokerURL:
    # The options follow the last ')' (or, without parentheses, the last '?' after the
    # last '@'), so that a passcode's ')', '?' or ',' is never taken for the list's end.
    query = ""
    if rest.startswith("("):
        close = rest.rfind(")")
        if close < 0:
            raise ValueError("failover URL: the address list has no closing ')'")
        inner, after = rest[1:close], rest[close + 1 :]
        if after and not after.startswith("?"):
            raise ValueError("failover URL: only '?options' may follow the address list")
        query = after[1:]
    else:
        inner = rest
        credentials_end = rest.rfind("@") + 1
        mark = rest.find("?", credentials_end)
        if mark >= 0 and "://" not in rest[mark:]:
            inner, query = rest[:mark], rest[mark + 1 :]
    pieces = [piece.strip() for piece in _NEXT_ADDRESS.split(inner)]
    if not inner.strip() or not all(pieces):
        raise ValueError("failover URL: the address list is empty or has an empty entry")
    addresses = [
        _parse_address(piece, where=f"failover address {number}")
        for number, piece in enumerate(pieces, 1)
    ]
    first = addresses[0]
    for number, other in enumerate(addresses[1:], 2):
        for name in ("tls", "websocket", "login", "passcode", "vhost"):
            if getattr(other, name) != getattr(first, name):
                # The client has one set of options for every broker.
                raise ValueError(
                    f"failover address {number}: its {name} differs from address 1's; "
                    "every address must use the same scheme, credentials and path"
                )
    options = _failover_options(query)
    hosts = tuple(address for parsed in addresses for address in parsed.hosts)
    return BrokerURL(
        hosts=hosts,
        tls=first.tls,
        websocket=first.websocket,
        login=first.login,
        passcode=first.passcode,
        vhost=first.vhost,
        **options,
    )


def _failover_options(query: str) -> dict[str, Any]:
    """The :class:`BrokerURL` fields a failover URL's options set: the Backoff, the
    order, the connect timeout (ActiveMQ's names, milliseconds).

    An option left out keeps stomp_proto's default (:class:`Backoff`'s; the
    order as written), not ActiveMQ's.
    """
    supported = (*FAILOVER_OPTIONS, *EXTRA_FAILOVER_OPTIONS, *CLIENT_FAILOVER_OPTIONS)
    values: dict[str, str] = {}
    for pair in query.split("&") if query else ():
        name, equals, value = pair.partition("=")
        name = unquote(name)
        if not equals:
            raise ValueError(f"failover option {name!r} has no value (write {name}=...)")
        if name not in supported:
            raise ValueError(
                f"failover option {name!r} is not supported; the supported ones are "
                + ", ".join(supported)
            )
        if name in values:
            raise ValueError(f"failover option {name!r} is given twice")
        values[name] = unquote(value)
    backoff: dict[str, Any] = {}
    if "initialReconnectDelay" in values:
        backoff["initial"] = _number(values, "initialReconnectDelay") / 1000
    if "maxReconnectDelay" in values:
        backoff["maximum"] = _number(values, "maxReconnectDelay") / 1000
    if "backOffMultiplier" in values:
        backoff["factor"] = _number(values, "backOffMultiplier")
        if backoff["factor"] < 1:
            raise ValueError("failover option 'backOffMultiplier' must be at least 1")
    if "useExponentialBackOff" in values and not _flag(values, "useExponentialBackOff"):
        if "backOffMultiplier" in values and backoff["factor"] != 1:
            raise ValueError(
                "failover options 'useExponentialBackOff=false' and "
                "'backOffMultiplier' contradict each other"
            )
        backoff["factor"] = 1.0
    if "maxReconnectAttempts" in values:
        attempts = _number(values, "maxReconnectAttempts")
        if attempts != int(attempts) or attempts < -1:
            raise ValueError("failover option 'maxReconnectAttempts' is -1 (forever) or a count")
        backoff["attempts"] = None if attempts == -1 else int(attempts)
    if "initial" in backoff and "maximum" in backoff and backoff["maximum"] < backoff["initial"]:
        raise ValueError(
            "failover option 'maxReconnectDelay' is shorter than 'initialReconnectDelay'"
        )
    for name, field_name in EXTRA_FAILOVER_OPTIONS.items():
        if name not in values:
            continue
        number = _number(values, name)
        if field_name in ("held_after", "reset_after"):
            backoff[field_name] = number / 1000
        elif field_name == "jitter":
            if number >= 1:
                raise ValueError("failover option 'jitter' is a fraction below 1, such as 0.1")
            backoff[field_name] = number
        else:
            if number != int(number):
                raise ValueError(f"failover option {name!r} is a whole number")
            backoff[field_name] = int(number)
    fields: dict[str, Any] = {"reconnect": Backoff(**backoff)}
    if "randomize" in values:
        fields["randomize"] = _flag(values, "randomize")
    if "connectTimeout" in values:
        milliseconds = _number(values, "connectTimeout")
        if not milliseconds:
            raise ValueError("failover option 'connectTimeout' must be positive")
        fields["connect_timeout"] = milliseconds / 1000
    if "failoverOnTimeout" in values:
        fields["failover_on_timeout"] = _flag(values, "failoverOnTimeout")
    return fields


def _number(values: Mapping[str, str], name: str) -> float:
    try:
        number = float(values[name])
    except ValueError:
        raise ValueError(f"failover option {name!r} is not a number: {values[name]!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"failover option {name!r} is not a finite number")
    if number < 0 and name != "maxReconnectAttempts":
        raise ValueError(f"failover option {name!r} is negative")
    return number


def _flag(values: Mapping[str, str], name: str) -> bool:
    value = values[name].lower()
    if value not in ("true", "false"):
        raise ValueError(f"failover option {name!r} is true or false, not {values[name]!r}")
    return value == "true"


def _parse_address(text: str, *, where: str) -> BrokerURL:
    scheme_match = _SCHEME.match(text)
    if scheme_match is None:
        raise ValueError(
            f"{where}: not of the form scheme://[login:passcode@]host[:port][/path]"
            f" (schemes: {', '.join(_SCHEMES)}, or failover:(...))"
        )
    scheme = scheme_match["scheme"].lower()
    if scheme not in _SCHEMES:
        raise ValueError(
            f"{where}: scheme {scheme_match['scheme']!r} is not supported; "
            f"use one of {', '.join(_SCHEMES)} (or failover:(...))"
        )
    tls, websocket, default_port = _SCHEMES[scheme]
    # The user info ends at the last '@', as urllib.parse reads an authority: a raw
    # '@', ':', '/', '?' or '#' in a passcode is taken as written (an '@' in the path
    # is written %40).  Nothing before that '@' is ever quoted in an error.
    userinfo, at, rest = text[scheme_match.end() :].rpartition("@")
    match = _AFTER_USERINFO.match(rest)
    assert match is not None  # every group may be empty
    if match["query"] is not None:
        raise ValueError(
            f"{where}: a query ('?...') is not supported on a broker address"
            " (failover options go after failover:(...))"
        )
    if match["fragment"] is not None:
        raise ValueError(f"{where}: a fragment ('#...') is not supported")
    login = passcode = None
    if at:
        user, colon, password = userinfo.partition(":")
        if not user:
            raise ValueError(f"{where}: the login before '@' is empty")
        login = unquote(user)
        passcode = unquote(password) if colon else None
    host, port = _host_port(match["hostport"], default_port, where)
    path = match["path"]
    vhost = None
    websocket_path = None
    if websocket:
        websocket_path = path or "/"
    elif path not in ("", "/"):
        vhost = unquote(path[1:])
        if "/" in path[1:]:
            raise ValueError(
                f"{where}: the path is the virtual host, one segment "
                "(write %2F for a '/' inside it)"
            )
    return BrokerURL(
        hosts=((host, port),),
        tls=tls,
        websocket=websocket_path,
        login=login,
        passcode=passcode,
        vhost=vhost,
    )


def _host_port(text: str, default_port: int, where: str) -> tuple[str, int]:
    if "," in text:
        raise ValueError(
            f"{where}: one address has one host; for several brokers write "
            "failover:(stomp://host1:61613,stomp://host2:61613)"
        )
    if text.startswith("["):  # an IPv6 literal
        close = text.find("]")
        if close < 0:
            raise ValueError(f"{where}: the IPv6 host has no closing ']'")
        host, rest = text[1:close], text[close + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"{where}: only ':port' may follow the IPv6 host")
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text_ = text.partition(":")
        port_text = port_text_ if colon else None
    if not host:
        raise ValueError(f"{where}: the host is missing")
    if port_text is None:
        return unquote(host), default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        # Only digits are quoted: text that is not a port may be a mistyped passcode
        # (a URL whose '@' was forgotten).
        shown = f" {port_text!r}" if port_text.isdigit() else ""
        raise ValueError(f"{where}: the port{shown} is not a number from 1 to 65535")
    return unquote(host), int(port_text)


# Tracebacks and reprs say stomp_proto.BrokerURL, the name users import, though the top
# level loads this module only on first use.
present_as("stomp_proto", BrokerURL)
