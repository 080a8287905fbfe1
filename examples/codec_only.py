# The frame codec underneath, for those who want only that.
from stomp_proto import FrameDecoder, HeartBeat

decoder = FrameDecoder("1.2")
decoder.receive_data(b"MESSAGE\ndestination:/queue/a\nmessage-id:7\n")
decoder.receive_data(b"subscription:0\ncontent-length:5\n\nhello\x00\n")
for item in decoder:  # drains every complete item
    if not isinstance(item, HeartBeat):
        print(item.command, item.get("destination"), item.body)
        # MESSAGE /queue/a b'hello'
