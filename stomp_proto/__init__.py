"""stomp_proto: the STOMP 1.0, 1.1 and 1.2 protocol, without I/O.

Bytes in, frames and events out; frames and events in, bytes out.  Sockets,
threads and clocks belong to the caller (or to the adapters built on top).

The codec (:class:`FrameDecoder`, :class:`FrameEncoder`) works on
:class:`Frame` values; the connections (:class:`ClientConnection`,
:class:`ServerConnection`) add the session rules and work on typed events.
Ready-made clients: :mod:`stomp_proto.asyncio`, :mod:`stomp_proto.trio`,
:mod:`stomp_proto.threads`; a broker for tests and demos:
:mod:`stomp_proto.broker`.
"""

import importlib
from typing import TYPE_CHECKING, Any, Literal

from ._build import loaded_build
from ._connection import ClientConnection, ServerConnection
from ._decoder import FrameDecoder
from ._encoder import FrameEncoder
from ._errors import ErrorKind, LocalProtocolError, ProtocolError, RemoteProtocolError
from ._events import (
    Abort,
    Ack,
    AckMode,
    Begin,
    Commit,
    Connect,
    Connected,
    ConnectionClosed,
    Disconnect,
    Error,
    Event,
    FrameEvent,
    Headers,
    HeartBeat,
    HeartBeatTimeout,
    Message,
    Nack,
    Receipt,
    Send,
    Subscribe,
    Unsubscribe,
)
from ._frame import Frame, Version
from ._header_map import HeaderMap
from ._limits import Limits
from ._public import present_as
from ._state import ConnectionState

#: Names of the clients' side, and of the closing helpers, loaded on first use (PEP
#: 562): ``import stomp_proto`` loads the sans-IO core only - no asyncio, socket or
#: ssl - as ``import h11`` loads no I/O.  Each maps to the module that defines it.
_ON_FIRST_USE = {
    "Backoff": "._client._backoff",
    "BrokerError": "._client._errors",
    "ClientError": "._client._errors",
    "ConnectionLost": "._client._errors",
    "HeartBeatLost": "._client._errors",
    "ReconnectExhausted": "._client._errors",
    "ClientState": "._client._lifecycle",
    "ClientStats": "._client._lifecycle",
    "StateHook": "._client._lifecycle",
    "SessionEvent": "._client._lifecycle",
    "SessionEventHook": "._client._lifecycle",
    "ClientOptions": "._client._options",
    "TracingHook": "._client._options",
    "BrokerURL": "._client._url",
    "DRAIN_BYTES": "._closing",
    "DRAIN_TIMEOUT": "._closing",
    "drain_and_close": "._closing",
}

if TYPE_CHECKING:  # what __getattr__ gives, for type checkers
    from ._client._backoff import Backoff
    from ._client._errors import (
        BrokerError,
        ClientError,
        ConnectionLost,
        HeartBeatLost,
        ReconnectExhausted,
    )
    from ._client._lifecycle import (
        ClientState,
        ClientStats,
        SessionEvent,
        SessionEventHook,
        StateHook,
    )
    from ._client._options import ClientOptions, TracingHook
    from ._client._url import BrokerURL
    from ._closing import DRAIN_BYTES, DRAIN_TIMEOUT, drain_and_close


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_ON_FIRST_USE})


__version__ = "0.1.0.dev0"

# Tracebacks and reprs say stomp_proto.FrameDecoder, not stomp_proto._decoder.FrameDecoder
# (the clients' names do the same where they are defined).
present_as(
    __name__,
    ClientConnection,
    ConnectionState,
    ErrorKind,
    Event,
    FrameDecoder,
    FrameEncoder,
    HeaderMap,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    ServerConnection,
)

# Which build of the sans-IO core is loaded: "accelerated" (the native twins of the
# core modules, stomp_proto/_*_native.pyx; see _build.py) or "pure".  Documented in
# docs/api.rst.
BUILD: Literal["pure", "accelerated"] = loaded_build()

__all__ = [
    "BUILD",
    "DRAIN_BYTES",
    "DRAIN_TIMEOUT",
    "Abort",
    "Ack",
    "AckMode",
    "Backoff",
    "Begin",
    "BrokerError",
    "BrokerURL",
    "ClientConnection",
    "ClientError",
    "ClientOptions",
    "ClientState",
    "ClientStats",
    "Commit",
    "Connect",
    "Connected",
    "ConnectionClosed",
    "ConnectionLost",
    "ConnectionState",
    "Disconnect",
    "Error",
    "ErrorKind",
    "Event",
    "Frame",
    "FrameDecoder",
    "FrameEncoder",
    "FrameEvent",
    "HeaderMap",
    "Headers",
    "HeartBeat",
    "HeartBeatLost",
    "HeartBeatTimeout",
    "Limits",
    "LocalProtocolError",
    "Message",
    "Nack",
    "ProtocolError",
    "Receipt",
    "ReconnectExhausted",
    "RemoteProtocolError",
    "Send",
    "ServerConnection",
    "SessionEvent",
    "SessionEventHook",
    "StateHook",
    "Subscribe",
    "TracingHook",
    "Unsubscribe",
    "Version",
    "drain_and_close",
]
