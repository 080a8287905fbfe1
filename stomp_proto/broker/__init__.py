"""An embedded STOMP broker, for tests and demos (not for production).

:class:`Broker` serves it over TCP (optionally TLS) with asyncio;
:class:`BrokerCore` is the same broker without I/O, driven step by step;
:func:`run_broker` serves until cancelled.  See :doc:`/broker`.
"""

from .._public import present_as
from ._access import Permissions, load_permissions
from ._core import BrokerCore, BrokerOptions, Outbox, Session
from ._server import Broker, run_broker
from ._throttle import LoginThrottle

__all__ = [
    "Broker",
    "BrokerCore",
    "BrokerOptions",
    "LoginThrottle",
    "Outbox",
    "Permissions",
    "Session",
    "load_permissions",
    "run_broker",
]

present_as(__name__, Broker, BrokerCore, LoginThrottle, Outbox, Session)
