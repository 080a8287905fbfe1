"""The broker's listening sockets and its own accept loop, which holds at the descriptor limit.

asyncio's server logs a traceback for every ``accept()`` that fails for lack
of file descriptors, and retries often enough to write hundreds of thousands
of them a minute while new clients wait.  :func:`accept_forever` instead backs
off - from :data:`BACKOFF_MIN` seconds, doubling up to :data:`BACKOFF_MAX` -
while accepting fails that way, and logs one line per
:data:`LOG_INTERVAL` seconds with the number of failures; once descriptors are
free again, connections waiting in the listen backlog are accepted as usual.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Awaitable, Callable

__all__ = ["BACKOFF_MAX", "BACKOFF_MIN", "LOG_INTERVAL", "accept_forever", "listen"]

log = logging.getLogger("stomp_proto.broker")

#: The errors that say the process or system is out of a resource, not that one client failed.
OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: Seconds to wait after the first accept that failed for lack of resources.
BACKOFF_MIN = 0.05
#: The longest wait between two tries while they keep failing.
BACKOFF_MAX = 1.0
#: Seconds between two log lines about failed accepts.
LOG_INTERVAL = 10.0
#: Connections waiting in the kernel to be accepted (asyncio's default too).
BACKLOG = 100


async def listen(host: str, port: int) -> list[socket.socket]:
    """Non-blocking sockets listening on every address of ``host`` at ``port``.

    With ``port`` 0, the first address gets a free port and the others the same one.
    """
    loop = asyncio.get_running_loop()
    # "" means every interface, as for asyncio's servers.
    passive = socket.AI_PASSIVE
    infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=passive)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                # Each family on its own socket, as asyncio's server does.
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


async def accept_forever(
    sock: socket.socket, connected: Callable[[socket.socket], Awaitable[None]]
) -> None:
    """Accept connections on ``sock`` and hand each to ``connected``, until cancelled."""
    loop = asyncio.get_running_loop()
    backoff = BACKOFF_MIN
    failed = 0  # accepts failed since the last log line
    logged_at: float | None = None
    while True:
        try:
            client, _ = await loop.sock_accept(sock)
        except OSError as exc:
            if exc.errno not in OUT_OF_RESOURCES:
                continue  # one client's trouble (reset while queued): take the next
            failed += 1
            now = loop.time()
            if logged_at is None or now - logged_at >= LOG_INTERVAL:
                log.warning(
                    "STOMP broker: cannot accept connections: %s; %d attempt(s) failed since"
                    " the last report; retrying with a back-off of up to %.1f s",
                    exc.strerror or exc,
                    failed,
                    BACKOFF_MAX,
                )
                failed, logged_at = 0, now
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)
            continue
        if failed or logged_at is not None:
            log.info("STOMP broker: accepting connections again (%d more failed first)", failed)
            failed, logged_at = 0, None
        backoff = BACKOFF_MIN
        try:
            await connected(client)
        except OSError:
            client.close()
