# Heart-beats every second both ways; the broker must beat too, or HeartBeatLost.
import asyncio

import stomp_proto.asyncio as stomp


async def main() -> None:
    async with stomp.connect("127.0.0.1", 61613, heartbeat=(1000, 1000)) as client:
        print("agreed:", client.connection.heartbeat)
        await asyncio.sleep(3)  # nothing to say: only heart-beats flow
        print("still connected")


asyncio.run(main())
