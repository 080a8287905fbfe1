# A client over TLS.  The broker: python -m stomp_proto broker --certfile cert.pem --keyfile key.pem
import asyncio
import ssl

import stomp_proto.asyncio as stomp


async def main() -> None:
    # Trust the broker's self-signed certificate; a broker with a certificate
    # from a public authority needs only ssl.create_default_context().
    context = ssl.create_default_context(cafile="cert.pem")
    async with (
        stomp.connect("127.0.0.1", 61613, ssl=context) as client,
        client.subscribe("/queue/tls") as messages,
    ):
        await client.send("/queue/tls", "over TLS", receipt=True)
        async for message in messages:
            print(message.body)  # b'over TLS'
            break


asyncio.run(main())
