"""Raw frames captured from RabbitMQ 3.10.8 and ActiveMQ 5.17.2: their ERROR frames, and
their CONNECTED frames in each version.

Byte for byte as recorded, except that the record shortens ActiveMQ's Java stack traces to
"\tat …"; that ellipsis is kept here as its UTF-8 bytes (\xe2\x80\xa6).  Each frame is
followed by the extra "\n" both brokers send after every NUL.
"""

# fmt: off
# ruff: noqa: E501

# ---------------------------------------------------------------- RabbitMQ ERROR frames

# FOO after CONNECTED (FOO carried receipt:r1; no receipt-id in the ERROR)
RABBIT_BAD_COMMAND = (
    b'ERROR\n'
    b'message:Bad command\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:34\n'
    b'\n'
    b'Could not interpret command "FOO"\n'
    b'\x00\n'
)

# any frame before CONNECT (garbage, SEND, FOO)
RABBIT_ILLEGAL_COMMAND = (
    b'ERROR\n'
    b'message:Illegal command\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:35\n'
    b'\n'
    b'You must log in using CONNECT first\x00\n'
)

# wrong password (closed by the login timeout after 10.0 s)
RABBIT_ACCESS_REFUSED = (
    b'ERROR\n'
    b'message:Bad CONNECT\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:32\n'
    b'\n'
    b"Access refused for user 'guest'\n"
    b'\x00\n'
)

# host:127.0.0.1 when that vhost does not exist
RABBIT_VHOST_DENIED = (
    b'ERROR\n'
    b'message:Bad CONNECT\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:38\n'
    b'\n'
    b"Virtual host '127.0.0.1' access denied\x00\n"
)

# SEND without destination
RABBIT_MISSING_DESTINATION = (
    b'ERROR\n'
    b'message:Missing destination\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:43\n'
    b'\n'
    b'"SEND" must include a \'destination\' header\n'
    b'\x00\n'
)

# ACK with an unknown id
RABBIT_INVALID_ACK = (
    b'ERROR\n'
    b'message:Invalid header\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:39\n'
    b'\n'
    b'"ACK" must include a valid "id" header\n'
    b'\x00\n'
)

# UNSUBSCRIBE unknown id (1.0 by destination gives ...Subscription to "destination=\'sub-1\'" not found.)
RABBIT_NO_SUBSCRIPTION = (
    b'ERROR\n'
    b'message:No subscription found\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:91\n'
    b'\n'
    b'UNSUBSCRIBE must refer to an existing subscription.\n'
    b'Subscription to "id=\'nope\'" not found.\n'
    b'\x00\n'
)

# COMMIT unknown transaction
RABBIT_BAD_TRANSACTION = (
    b'ERROR\n'
    b'message:Bad transaction\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:42\n'
    b'\n'
    b'Invalid transaction identifier: "tx-nope"\n'
    b'\x00\n'
)

# unknown destination prefix
RABBIT_UNKNOWN_DESTINATION = (
    b'ERROR\n'
    b'message:Unknown destination\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:135\n'
    b'\n'
    b"'/foo/bar' is not a valid destination.\n"
    b'Valid destination types are: /temp-queue, /exchange, /topic,'
    b' /queue, /amq/queue, /reply-queue/.\n'
    b'\x00\n'
)

# SEND to a missing exchange -> ERROR then socket CLOSED
RABBIT_NOT_FOUND = (
    b'ERROR\n'
    b'message:not_found\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:43\n'
    b'\n'
    b"NOT_FOUND - no exchange 'nope' in vhost '/'\x00\n"
)

# duplicate subscription id -> ERROR, RECEIPT r2, then CLOSED
RABBIT_DUPLICATE_SUBSCRIPTION_THEN_RECEIPT = (
    b'ERROR\n'
    b'message:Duplicated subscription identifier\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:51\n'
    b'\n'
    b"A subscription identified by 'T_s1' already exists.\x00\n"
    b'RECEIPT\n'
    b'receipt-id:r2\n'
    b'\n'
    b'\x00\n'
)

# ---------------------------------------------------------------- ActiveMQ ERROR frames

# FOO after CONNECTED (1.2, frame had receipt:r1) -> CLOSED; note "\c" in the message header
AMQ_UNKNOWN_ACTION_FOO = (
    b'ERROR\n'
    b'content-type:text/plain\n'
    b'receipt-id:r1\n'
    b'message:Unknown STOMP action\\c FOO\n'
    b'\n'
    b'org.apache.activemq.transport.stomp.ProtocolException: Unknown STOMP action: FOO\n'
    b'\tat org.apache.activemq.transport.stomp.ProtocolConverter.on'
    b'StompCommand(ProtocolConverter.java:258)\n'
    b'\tat org.apache.activemq.transport.stomp.StompTransportFilter'
    b'.onCommand(StompTransportFilter.java:85)\n'
    b'\tat org.apache.activemq.transport.TransportSupport.doConsume(TransportSupport.java:83)\n'
    b'\tat org.apache.activemq.transport.tcp.TcpTransport.doRun(TcpTransport.java:233)\n'
    b'\tat org.apache.activemq.transport.tcp.TcpTransport.run(TcpTransport.java:215)\n'
    b'\tat java.base/java.lang.Thread.run(Thread.java:840)\n'
    b'\x00\n'
)

# garbage first ("hello world\r\n\r\n...") -> CLOSED (no version negotiated yet: ":" not escaped)
AMQ_UNKNOWN_ACTION_GARBAGE = (
    b'ERROR\n'
    b'content-type:text/plain\n'
    b'message:Unknown STOMP action: hello world\n'
    b'\n'
    b'org.apache.activemq.transport.stomp.ProtocolException: Unkno'
    b'wn STOMP action: hello world\n'
    b'\tat \xe2\x80\xa6\n'
    b'\x00\n'
)

# wrong password (AMQ_AUTH=1) -> CLOSED, no stack trace
AMQ_BAD_PASSWORD = (
    b'ERROR\n'
    b'content-type:text/plain\n'
    b'message:User name [guest] or password is invalid.\n'
    b'\n'
    b'User name [guest] or password is invalid.\x00\n'
)

# SEND without destination (receipt:r-send) -> stays open
AMQ_NO_DESTINATION = (
    b'ERROR\n'
    b'content-type:text/plain\n'
    b'receipt-id:r-send\n'
    b'message:SEND received without a Destination specified!\n'
    b'\n'
    b'org.apache.activemq.transport.stomp.ProtocolException: SEND '
    b'received without a Destination specified!\n'
    b'\tat \xe2\x80\xa6\n'
    b'\x00\n'
)

# SUBSCRIBE without id in 1.2 -> stays open
AMQ_SUBSCRIBE_WITHOUT_ID = (
    b'ERROR\n'
    b'content-type:text/plain\n'
    b'receipt-id:r-sub\n'
    b'message:SUBSCRIBE received without a subscription id!\n'
    b'\n'
    b'org.apache.activemq.transport.stomp.ProtocolException: SUBSC'
    b'RIBE received without a subscription id!\n'
    b'\tat \xe2\x80\xa6\n'
    b'\x00\n'
)

# ACK unknown id -> stays open
AMQ_UNEXPECTED_ACK = (
    b'ERROR\n'
    b'content-type:text/plain\n'
    b'receipt-id:r-ack\n'
    b'message:Unexpected ACK received for message-id [null]\n'
    b'\n'
    b'org.apache.activemq.transport.stomp.ProtocolException: Unexp'
    b'ected ACK received for message-id [null]\n'
    b'\tat \xe2\x80\xa6\n'
    b'\x00\n'
)

# content-length shorter than the body -> CLOSED
AMQ_NO_TRAILING_NUL = (
    b'ERROR\n'
    b'content-type:text/plain\n'
    b'message:content-length bytes were read and there was no trailing null byte\n'
    b'\n'
    b'org.apache.activemq.transport.stomp.ProtocolException: conte'
    b'nt-length bytes were read and there was no trailing null byte\n'
    b'\tat org.apache.activemq.transport.stomp.StompWireFormat.unma'
    b'rshal(StompWireFormat.java:149)\n'
    b'\tat \xe2\x80\xa6\n'
    b'\x00\n'
)

# 70 kB header -> CLOSED
AMQ_MAX_HEADER_LENGTH = (
    b'ERROR\n'
    b'content-type:text/plain\n'
    b'message:The maximum header length was exceeded\n'
    b'\n'
    b'org.apache.activemq.transport.stomp.ProtocolException: The m'
    b'aximum header length was exceeded\n'
    b'\tat org.apache.activemq.transport.stomp.StompWireFormat.read'
    b'HeaderLine(StompWireFormat.java:197)\n'
    b'\tat \xe2\x80\xa6\n'
    b'\x00\n'
)

# second CONNECT -> stays open
AMQ_ALREADY_CONNECTED = (
    b'ERROR\n'
    b'content-type:text/plain\n'
    b'message:Already connected.\n'
    b'\n'
    b'org.apache.activemq.transport.stomp.ProtocolException: Already connected.\n'
    b'\tat \xe2\x80\xa6\n'
    b'\x00\n'
)

# ---------------------------------------------------------------- CONNECTED frames

# pure 1.0 CONNECT (no accept-version, no host)
RABBIT_CONNECTED_10 = (
    b'CONNECTED\n'
    b'server:RabbitMQ/3.10.8\n'
    b'session:session-AuWrQMOFG_mfoVEh7epXAA\n'
    b'heart-beat:0,0\n'
    b'version:1.0\n'
    b'\n'
    b'\x00\n'
)

AMQ_CONNECTED_10 = (
    b'CONNECTED\n'
    b'server:ActiveMQ/5.17.2\n'
    b'heart-beat:0,0\n'
    b'session:ID:vm-37173-1795314571027-3:2\n'
    b'version:1.0\n'
    b'\n'
    b'\x00\n'
)

# accept-version:1.2, heart-beat:1000,1000
RABBIT_CONNECTED_12 = (
    b'CONNECTED\n'
    b'server:RabbitMQ/3.10.8\n'
    b'session:session-bnjjXUtOVg6331MeTv4kXg\n'
    b'heart-beat:1000,1000\n'
    b'version:1.2\n'
    b'\n'
    b'\x00\n'
)

AMQ_CONNECTED_12 = (
    b'CONNECTED\n'
    b'server:ActiveMQ/5.17.2\n'
    b'heart-beat:1000,1000\n'
    b'session:ID:vm-37173-1795314571027-3:5\n'
    b'version:1.2\n'
    b'\n'
    b'\x00\n'
)

# accept-version:2.0 (RabbitMQ leaves the socket open)
RABBIT_VERSION_MISMATCH = (
    b'ERROR\n'
    b'message:Version mismatch\n'
    b'content-type:text/plain\n'
    b'version:1.0,1.1,1.2\n'
    b'content-length:35\n'
    b'\n'
    b'Supported versions are 1.0,1.1,1.2\n'
    b'\x00\n'
)
