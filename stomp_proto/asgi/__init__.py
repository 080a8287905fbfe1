"""STOMP over WebSocket for Python web apps: an ASGI application on the broker's core.

:class:`StompApp` is an ASGI 3 application (no dependency: ASGI is a calling
convention) serving the embedded broker's :class:`~stomp_proto.broker.BrokerCore`
to browsers (stompjs) and other WebSocket clients.  Mount it in Starlette or
FastAPI (``app.mount("/ws", stomp_app)``) or serve it alone (``uvicorn
module:stomp_app``).  Besides ``/topic`` and ``/queue`` as the broker has them
(acks, receipts, transactions), SENDs under ``app_prefix`` go to the app's
handlers (:meth:`StompApp.handler`) and ``/user/...`` destinations reach every
session of one user.  With a :class:`Relay`, destinations under its prefixes
are served by RabbitMQ or ActiveMQ instead, one upstream connection per
session.  See :doc:`/webapps`.

Each WebSocket gets a :class:`~stomp_proto.broker.Session` and one task that
waits for input with a timeout taken from the session's timer (heart-beats and
the broker's deadlines, on ``loop.time()``), feeds it to the core, and queues
what the core returns for every session it names; a writer task per session
sends it, and deliveries to a session pause while more than ``output_limit``
bytes wait for it (as in :class:`~stomp_proto.broker.Broker`).  Input is
bounded the same way: a session takes at most :data:`INPUT_LIMIT` bytes from
the server before it waits, and reads nothing while one of its SENDs is with a
handler or the memory alarm holds its publisher back, so the server stops
reading from that client.
"""

from .._public import present_as
from . import _app, _peer, _relay
from ._app import AppMessage, Refused, StompApp
from ._relay import Relay

__all__ = ["AppMessage", "Refused", "Relay", "StompApp"]

# _app.py holds the application, _peer.py the WebSocket side of one session, and
# _relay.py the relay: a session's frames forwarded to another broker.
present_as(__name__, AppMessage, Refused, Relay, StompApp)

# The constants stay importable here, as when the package was one module.
USER_PREFIX = _app.USER_PREFIX
HANDLER_FAILED = _app.HANDLER_FAILED
INPUT_LIMIT = _peer.INPUT_LIMIT
CLOSE_TIMEOUT = _peer.CLOSE_TIMEOUT
BROKER_LOST = _relay.BROKER_LOST
BROKER_UNAVAILABLE = _relay.BROKER_UNAVAILABLE
RELAY_PREFIXES = _relay.RELAY_PREFIXES
RELAY_PENDING = _relay.RELAY_PENDING
RELAY_CLOSE_TIMEOUT = _relay.RELAY_CLOSE_TIMEOUT
