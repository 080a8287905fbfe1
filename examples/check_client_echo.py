# The echo script of `stomp-check client`, for stomp_proto's clients:
#   stomp-check client --port 61630 &
#   python examples/check_client_echo.py --port 61630 --client asyncio   # or trio, threads
# Connect, subscribe to /queue/check, echo each message (body and x- headers) to
# /queue/echo with a receipt; start over when the session ends; stop at "done".
import argparse
import asyncio
import contextlib

import stomp_proto.asyncio
import stomp_proto.threads
from stomp_proto import BrokerError, ClientError

DONE = "check-client done"
OPTIONS = {"heartbeat": (500, 500), "timeout": 10.0}


def echo_headers(message: stomp_proto.Message) -> dict[str, str]:
    echo: dict[str, str] = {}
    for name, value in message.headers:
        if name.startswith("x-"):
            echo.setdefault(name, value)  # of a repeated header, the first is the value
    return echo


def finished(error: ClientError) -> bool:
    return isinstance(error, BrokerError) and error.message == DONE


async def asyncio_session(port: int) -> bool:
    """One session; True when the checker says it is done."""
    try:
        async with (
            stomp_proto.asyncio.connect("127.0.0.1", port, **OPTIONS) as client,
            client.subscribe("/queue/check") as messages,
        ):
            async for message in messages:
                await client.send(
                    "/queue/echo", message.body, headers=echo_headers(message), receipt=True
                )
    except ClientError as error:
        return finished(error)
    return False


async def trio_session(port: int) -> bool:
    import stomp_proto.trio

    try:
        async with (
            stomp_proto.trio.connect("127.0.0.1", port, **OPTIONS) as client,
            client.subscribe("/queue/check") as messages,
        ):
            async for message in messages:
                await client.send(
                    "/queue/echo", message.body, headers=echo_headers(message), receipt=True
                )
    except ClientError as error:
        return finished(error)
    return False


def threads_session(port: int) -> bool:
    try:
        with (
            stomp_proto.threads.connect("127.0.0.1", port, **OPTIONS) as client,
            client.subscribe("/queue/check") as messages,
        ):
            for message in messages:
                client.send(
                    "/queue/echo", message.body, headers=echo_headers(message), receipt=True
                )
    except ClientError as error:
        return finished(error)
    return False


def main(port: int, client: str, sessions: int = 500) -> int:
    """Run sessions until the checker is done; the number of sessions run."""
    for count in range(1, sessions + 1):
        with contextlib.suppress(OSError):
            if client == "asyncio":
                done = asyncio.run(asyncio_session(port))
            elif client == "trio":
                import trio

                done = trio.run(trio_session, port)
            else:
                done = threads_session(port)
            if done:
                return count
    return sessions


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=61630)
    parser.add_argument("--client", choices=("asyncio", "trio", "threads"), default="asyncio")
    arguments = parser.parse_args()
    main(arguments.port, arguments.client)
