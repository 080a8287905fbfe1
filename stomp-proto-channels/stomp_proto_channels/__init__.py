"""STOMP over WebSocket for Django Channels, on stomp-proto's broker core.

:class:`StompConsumer` is a Channels consumer serving the WebSocket
connections routed to it from a :class:`stomp_proto.asgi.StompApp` (the
process's embedded broker: subprotocols, receipts, acknowledgements, app and
user destinations).  :func:`make_app` makes that app with its topics shared
by every process through the Channels channel layer: a SEND to a ``/topic/``
destination in one process reaches the subscribers of all of them, and so
does :func:`publish` from any Django code.  Queues, acknowledgements,
transactions, app and user destinations stay in each process.
"""

from typing import ClassVar  # noqa: F401  (StompConsumer's type hints resolve here)

from stomp_proto.asgi import StompApp  # noqa: F401  (likewise)

from ._consumer import (
    DEFAULT_LAYER,
    GROUP,
    MESSAGE_TYPE,
    REJOIN_INTERVAL,
    StompConsumer,
    close_app,
    django_user,
    make_app,
    publish,
)

__all__ = ["StompConsumer", "close_app", "django_user", "make_app", "publish"]

# The constants stay importable here.
__all__ += ["DEFAULT_LAYER", "GROUP", "MESSAGE_TYPE", "REJOIN_INTERVAL"]

#: Each class renamed below, and the module that defines it (docs/conf.py puts these
#: back while the site is built, for autodoc's ``#:`` comments and viewcode).
DEFINED_IN: dict[type, str] = {StompConsumer: StompConsumer.__module__}

# Tracebacks and reprs say stomp_proto_channels.StompConsumer, the name users import.
StompConsumer.__module__ = __name__
