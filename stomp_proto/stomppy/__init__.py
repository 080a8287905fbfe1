"""stomp.py's API on the stomp_proto core: ``import stomp_proto.stomppy as stomp``.

A stomp.py 9 program changes its import line and runs: the connection classes,
listeners, exceptions and frames keep stomp.py's names and signatures, and the
submodules its documentation names are here (``stomp_proto.stomppy.listener``,
``.exception``, ``.utils``, ``.connect``, ``.transport``, ``.adapter.ws``).
Underneath, frames are read and written by the sans-IO core; one reader thread
per connection calls the listeners, keeps heart-beats and reconnects.

Where it differs from stomp.py (see :doc:`/stomppy`): the connection
reconnects by itself and re-subscribes; ``on_disconnected`` is informational and
a ``connect()`` made from it joins the reconnect; ``disconnect()`` waits for the
broker's receipt; the passcode is never logged; TLS certificates are verified by
default; frames are logged at DEBUG to the ``stomp_proto.stomppy`` logger.
"""

from __future__ import annotations

from . import adapter as adapter
from . import colours as colours
from . import connect as connect
from . import constants as constants
from . import exception as exception
from . import listener as listener
from . import log as log
from . import logging as logging  # stomp.py 8's name for log
from . import protocol as protocol
from . import transport as transport
from . import utils as utils

__version__ = "9.0.0"

__all__ = [
    "Connection",
    "Connection10",
    "Connection11",
    "Connection12",
    "ConnectionListener",
    "Frame",
    "PrintingListener",
    "StatsListener",
    "StompConnection10",
    "StompConnection11",
    "StompConnection12",
    "TestListener",
    "Transport",
    "WSConnection",
    "WSStompConnection",
    "WaitingListener",
]

Connection10 = StompConnection10 = connect.StompConnection10
Connection11 = StompConnection11 = connect.StompConnection11
Connection12 = StompConnection12 = connect.StompConnection12
WSConnection = WSStompConnection = adapter.ws.WSStompConnection
#: The default connection: STOMP 1.1, as in stomp.py.
Connection = connect.StompConnection11

ConnectionListener = listener.ConnectionListener
StatsListener = listener.StatsListener
WaitingListener = listener.WaitingListener
PrintingListener = listener.PrintingListener
TestListener = listener.TestListener
#: What listeners receive (:class:`stomp_proto.stomppy.utils.Frame`).
Frame = utils.Frame
#: The engine under every connection (:class:`stomp_proto.stomppy.transport.Transport`).
Transport = transport.Transport
