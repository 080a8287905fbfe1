# A blocking listener on the codec alone: it prints the first message on /queue/work.
import socket

from stomp_proto import Frame, FrameDecoder, FrameEncoder, HeartBeat


def listen(host: str, port: int, destination: str, count: int) -> None:
    encoder = FrameEncoder("1.2")
    decoder = FrameDecoder("1.2")
    with socket.create_connection((host, port)) as sock:
        connect = Frame.make("CONNECT", {"accept-version": "1.2", "host": host})
        sock.sendall(encoder.encode(connect))
        while count > 0:
            data = sock.recv(65536)
            decoder.receive_data(data or None)  # None marks the end of stream
            for item in decoder:
                if isinstance(item, HeartBeat):
                    continue
                if item.command == "CONNECTED":
                    version = item.get("version", "1.0")
                    decoder.version = encoder.version = version
                    subscribe = Frame.make("SUBSCRIBE", {"id": "0", "destination": destination})
                    sock.sendall(encoder.encode(subscribe))
                elif item.command == "MESSAGE":
                    print(item.body)
                    count -= 1
                elif item.command == "ERROR":
                    raise RuntimeError(item.get("message", "ERROR frame"))
            if not data:
                return


listen("127.0.0.1", 61613, "/queue/work", count=1)
