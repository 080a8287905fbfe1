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

from typing import Literal

from ._build import loaded_build
from ._client._core import (
    Backoff,
    BrokerError,
    ClientError,
    ClientOptions,
    ConnectionLost,
    HeartBeatLost,
    TracingHook,
)
from ._closing import DRAIN_BYTES, DRAIN_TIMEOUT, drain_and_close
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
from ._limits import Limits
from ._public import present_as
from ._state import ConnectionState
from ._url import BrokerURL

__version__ = "0.1.0.dev0"

# Tracebacks and reprs say stomp_proto.ConnectionLost, not stomp_proto._client._core...
present_as(
    __name__,
    BrokerError,
    BrokerURL,
    ClientConnection,
    ClientError,
    ConnectionLost,
    ConnectionState,
    ErrorKind,
    Event,
    FrameDecoder,
    FrameEncoder,
    HeartBeatLost,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    ServerConnection,
    TracingHook,
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
    "RemoteProtocolError",
    "Send",
    "ServerConnection",
    "Subscribe",
    "TracingHook",
    "Unsubscribe",
    "Version",
    "drain_and_close",
]
