# The same session without any I/O: the layer every client is built on.
from stomp_proto import ClientConnection, Connect, Send

conn = ClientConnection()
data = conn.send(Connect(host="/", heartbeat=(10_000, 10_000)))  # bytes to write
print(data)
conn.receive_data(b"CONNECTED\nversion:1.2\nheart-beat:10000,10000\n\n\x00")
print(conn.next_event())  # Connected(version='1.2', heartbeat=(10000, 10000), ...)
data = conn.send(Send("/queue/a", b"hi"))
print(data)  # b'SEND\ndestination:/queue/a\ncontent-length:2\n\nhi\x00'
deadline = conn.get_timer()  # when to call conn.handle_timer(now) for heart-beats
print(deadline)  # 0.0: call handle_timer(now) at once, which starts the clock
