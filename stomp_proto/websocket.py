"""STOMP over WebSocket without I/O: the handshakes and the open channel.

The clients and the broker put these on their byte streams; they are public for
code that drives a WebSocket itself (the conformance checker, a proxy, a test
harness).  Each takes bytes in and gives bytes to send out, as
:class:`~stomp_proto.FrameDecoder` does: :class:`ClientHandshake` and
:class:`ServerHandshake` make the upgrade, and the :class:`WebSocketChannel`
they give carries the STOMP byte stream.  They need the wsproto package (the
``ws`` extra), imported when one is first made, never by this import.
"""

from ._public import present_as
from ._websocket import (
    SUBPROTOCOLS,
    ClientHandshake,
    OriginPolicy,
    Received,
    ServerHandshake,
    Upgrade,
    WebSocketChannel,
)

__all__ = [
    "SUBPROTOCOLS",
    "ClientHandshake",
    "OriginPolicy",
    "Received",
    "ServerHandshake",
    "Upgrade",
    "WebSocketChannel",
]

present_as(__name__, ClientHandshake, ServerHandshake, WebSocketChannel, OriginPolicy)
