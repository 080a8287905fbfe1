"""The clauses the cases test, quoted word for word from the STOMP specifications.

The specifications (stomp.github.io) are published under Creative Commons
Attribution licences (2.5 for 1.0 and 1.1, 3.0 for 1.2); each quote names its
version and section.  A clause is quoted from the newest version that has it;
``also`` names the older versions whose spec has the same words in the same
section, and ``per_version`` holds an older version's own words where they
differ.  A version with neither does not state the rule: its case shows the
newer words and can only be INFORMATIONAL, level UNSTATED (see
:meth:`Clause.judged`).  The
checker's own explanation goes in ``remark``, never inside a quote.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stomp_proto import Version

#: Newest first: where a version without its own words borrows them from.
_NEWER: dict[str, tuple[Version, ...]] = {"1.0": ("1.1", "1.2"), "1.1": ("1.2",), "1.2": ()}


@dataclass(frozen=True, slots=True)
class Judged:
    """What a case of one version quotes, how a miss is judged, and the checker's remark."""

    section: str
    text: str
    level: str
    remark: str


@dataclass(frozen=True, slots=True)
class Clause:
    """One quoted passage: the section it comes from and its words."""

    #: ``<version> §<section>`` of the newest version that states the clause.
    section: str
    #: The spec's words, verbatim (``[...]`` marks words left out).
    text: str
    #: Version -> (section, text) where that version's spec words it differently.
    per_version: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Older versions whose spec has ``text`` in the same section.
    also: tuple[Version, ...] = ()
    #: The checker's note on the clause (not the spec's words).
    remark: str = ""

    def quote(self, version: Version) -> tuple[str, str] | None:
        """``(section, text)`` in the spec of ``version``; None when it does not state it."""
        if version in self.per_version:
            return self.per_version[version]
        newest = self.section.split(" ", 1)[0]
        if version == newest:
            return self.section, self.text
        if version in self.also:
            return f"{version} {self.section.split(' ', 1)[1]}", self.text
        return None

    def judged(self, version: Version, level: str) -> Judged:
        """The quote for ``version`` and the level a miss gets there.

        A version whose spec does not state the clause is shown the newer
        version's words, and a miss is at most INFORMATIONAL (level UNSTATED):
        a broker speaking that version breaks no rule of it.
        """
        own = self.quote(version)
        if own is not None:
            return Judged(own[0], own[1], level, self.remark)
        for newer in _NEWER[version]:
            borrowed = self.quote(newer)
            if borrowed is not None:
                note = (
                    f"STOMP {version} does not state this rule; the words are {newer}'s, "
                    f"so a miss is INFORMATIONAL for {version}."
                )
                remark = f"{self.remark} {note}" if self.remark else note
                return Judged(borrowed[0], borrowed[1], "UNSTATED", remark)
        raise ValueError(f"no version at or after {version} states {self.text!r}")


_FRAME = "1.2 §STOMP Frames"
_ENCODING = "1.2 §Value Encoding"
_V11: tuple[Version, ...] = ("1.1",)
_ALL_OLDER: tuple[Version, ...] = ("1.0", "1.1")

CLAUSES: dict[str, Clause] = {
    "frame-eol": Clause(
        _FRAME,
        "The frame starts with a command string terminated by an end-of-line (EOL), which "
        "consists of an OPTIONAL carriage return (octet 13) followed by a REQUIRED line feed "
        "(octet 10).",
        {
            "1.0": (
                "1.0 §Stomp Protocol Specification",
                "followed by a newline, followed by headers in a <key>:<value> with each "
                "header followed by a newline.",
            ),
            "1.1": (
                "1.1 §STOMP Frames",
                "The frame starts with a command string terminated by a newline.",
            ),
        },
        remark="STOMP 1.0 and 1.1 end lines with a newline (LF) only: by their grammar a CR "
        "before it belongs to the line.",
    ),
    "frame-eols-after-nul": Clause(
        _FRAME,
        "The NULL octet can be optionally followed by multiple EOLs.",
        {
            "1.1": (
                "1.1 §STOMP Frames",
                "The null byte can be optionally followed by multiple newlines.",
            )
        },
    ),
    "frame-case": Clause(
        _FRAME,
        "All commands and header names referenced in this document are case sensitive.",
        also=_V11,
    ),
    "escape-decode": Clause(
        _ENCODING,
        "When decoding frame headers, the following transformations MUST be applied: \\r "
        "(octet 92 and 114) translates to carriage return (octet 13) \\n (octet 92 and 110) "
        "translates to line feed (octet 10) \\c (octet 92 and 99) translates to : (octet 58) "
        "\\\\ (octet 92 and 92) translates to \\ (octet 92)",
        {
            "1.1": (
                "1.1 §Value Encoding",
                "When decoding frame headers, the following transformations MUST be applied: "
                "\\n (octet 92 and 110) translates to newline (octet 10) \\c (octet 92 and 99) "
                "translates to : (octet 58) \\\\ (octet 92 and 92) translates to \\ (octet 92)",
            )
        },
    ),
    "escape-encode": Clause(
        _ENCODING,
        "All frames except the CONNECT and CONNECTED frames will also escape any carriage "
        "return, line feed or colon found in the resulting UTF-8 encoded headers. [...] "
        "Conversely when encoding frame headers, the reverse transformation MUST be applied.",
        {
            "1.1": (
                "1.1 §Value Encoding",
                "All frames except the CONNECT and CONNECTED frames will also escape any colon "
                "or newline octets found in the resulting UTF-8 encoded headers. [...] "
                "Conversely when encoding frame headers, the reverse transformation MUST be "
                "applied.",
            )
        },
    ),
    "escape-undefined": Clause(
        _ENCODING,
        "Undefined escape sequences such as \\t (octet 92 and 116) MUST be treated as a fatal "
        "protocol error.",
        {
            "1.1": (
                "1.1 §Value Encoding",
                "Undefined escape sequences such as \\r (octet 92 and 114) MUST be treated as a "
                "fatal protocol error.",
            )
        },
    ),
    "escape-connect": Clause(
        _ENCODING,
        "The CONNECT and CONNECTED frames do not escape the carriage return, line feed or "
        "colon octets in order to remain backward compatible with STOMP 1.0.",
        {
            "1.1": (
                "1.1 §Value Encoding",
                "The CONNECT and CONNECTED frames do not escape the colon or newline octets in "
                "order to remain backward compatible with STOMP 1.0.",
            )
        },
    ),
    "escape-none-10": Clause(
        "1.0 §Stomp Protocol Specification",
        "followed by headers in a <key>:<value> with each header followed by a newline.",
        remark="STOMP 1.0 defines no escapes: a backslash is an ordinary octet.",
    ),
    "no-trim": Clause(
        _ENCODING,
        "In STOMP 1.2, clients and servers MUST never trim or pad headers with spaces.",
        {
            "1.1": (
                "1.1 §Value Encoding",
                "In STOMP 1.1, clients and servers MUST never trim or pad headers with spaces.",
            ),
        },
    ),
    "body-only": Clause(
        "1.2 §Body",
        "Only the SEND, MESSAGE, and ERROR frames MAY have a body. All other frames MUST NOT "
        "have a body.",
        {
            "1.1": (
                "1.1 §Value Encoding",
                "Only the SEND, MESSAGE, and ERROR frames can have a body. All other frames "
                "MUST NOT have a body.",
            )
        },
    ),
    "content-length": Clause(
        "1.2 §Header content-length",
        "If a content-length header is included, this number of octets MUST be read, "
        "regardless of whether or not there are NULL octets in the body. The frame still "
        "needs to be terminated with a NULL octet.",
        {
            "1.1": (
                "1.1 §Header content-length",
                "If a content-length header is included, this number of bytes MUST be read, "
                "regardless of whether or not there are null characters in the body. The frame "
                "still needs to be terminated with a null byte.",
            ),
            "1.0": (
                "1.0 §SEND",
                "If a content-length header is included, this number of bytes should be read, "
                "regardless of whether or not there are null characters in the body.",
            ),
        },
    ),
    "content-length-should": Clause(
        "1.2 §Header content-length",
        "If a frame body is present, the SEND, MESSAGE and ERROR frames SHOULD include a "
        "content-length header to ease frame parsing. If the frame body contains NULL octets, "
        "the frame MUST include a content-length header.",
        {
            "1.1": (
                "1.1 §Header content-length",
                "The SEND, MESSAGE and ERROR frames SHOULD include a content-length header if a "
                "frame body is present. If a frame's body contains NULL octets, the frame MUST "
                "include a content-length header.",
            ),
            "1.0": (
                "1.0 §MESSAGE",
                "It is recommended that MESSAGE frames include a content-length header which is "
                "a byte count for the length of the message body.",
            ),
        },
    ),
    "content-length-error": Clause(
        "1.2 §ERROR",
        "ERROR frames SHOULD include a content-length header and a content-type header if a "
        "body is present.",
        {
            "1.0": (
                "1.0 §ERROR",
                "It is recommended that ERROR frames include a content-length header which is a "
                "byte count for the length of the message body.",
            )
        },
        also=_V11,
    ),
    "content-type": Clause(
        "1.2 §Header content-type",
        "If a frame body is present, the SEND, MESSAGE and ERROR frames SHOULD include a "
        "content-type header to help the receiver of the frame interpret its body.",
        {
            "1.1": (
                "1.1 §Header content-type",
                "The SEND, MESSAGE and ERROR frames SHOULD include a content-type header if a "
                "frame body is present.",
            )
        },
    ),
    "utf8": Clause(
        "1.2 §Header content-type",
        "All STOMP clients and servers MUST support UTF-8 encoding and decoding.",
        also=_V11,
    ),
    "receipt": Clause(
        "1.2 §Header receipt",
        "Any client frame other than CONNECT MAY specify a receipt header with an arbitrary "
        "value. This will cause the server to acknowledge the processing of the client frame "
        "with a RECEIPT frame",
        {
            "1.1": (
                "1.1 §Header receipt",
                "Any client frame other than CONNECT MAY specify a receipt header with an "
                "arbitrary value. This will cause the server to acknowledge receipt of the frame "
                "with a RECEIPT frame which contains the value of this header as the value of "
                "the receipt-id header in the RECEIPT frame.",
            ),
            "1.0": (
                "1.0 §Receipt",
                "Any client frame other than CONNECT may specify a receipt header with an "
                "arbitrary value. This will cause the server to acknowledge receipt of the frame "
                "with a RECEIPT frame which contains the value of this header as the value of "
                "the receipt-id header in the RECEIPT packet.",
            ),
        },
    ),
    "receipt-id": Clause(
        "1.2 §RECEIPT",
        "A RECEIPT frame MUST include the header receipt-id, where the value is the value of "
        "the receipt header in the frame which this is a receipt for.",
        {
            "1.1": (
                "1.1 §RECEIPT",
                "A RECEIPT frame will include the header receipt-id, where the value is the "
                "value of the receipt header in the frame which this is a receipt for.",
            ),
        },
    ),
    "receipt-cumulative": Clause(
        "1.2 §RECEIPT",
        "Since STOMP is stream based, the receipt is also a cumulative acknowledgment that all "
        "the previous frames have been received by the server.",
    ),
    "disconnect": Clause(
        "1.2 §DISCONNECT",
        "send a DISCONNECT frame with a receipt header set. [...] wait for the RECEIPT frame "
        "response to the DISCONNECT.",
        also=_V11,
    ),
    "repeated": Clause(
        "1.2 §Repeated Header Entries",
        "If a client or a server receives repeated frame header entries, only the first "
        "header entry SHOULD be used as the value of header entry.",
    ),
    "repeated-client": Clause(
        "1.2 §Repeated Header Entries",
        "If a client or a server receives repeated frame header entries, only the first "
        "header entry SHOULD be used as the value of header entry.",
        {
            "1.1": (
                "1.1 §Repeated Header Entries",
                "If the client receives repeated frame header entries, only the first header "
                "entry SHOULD be used as the value of header entry.",
            )
        },
    ),
    "size-limits": Clause(
        "1.2 §Size Limits",
        "servers MAY place maximum limits on: [...] If these limits are exceeded the server "
        "SHOULD send the client an ERROR frame and then close the connection.",
        {
            "1.1": (
                "1.1 §Size Limits",
                "servers MAY place maximum limits on: [...] If these limits are exceeded the "
                "server SHOULD send the client an ERROR frame and disconnect the client.",
            )
        },
    ),
    "connected": Clause(
        "1.2 §Connecting",
        "If the server accepts the connection attempt it will respond with a CONNECTED frame",
        {
            "1.0": (
                "1.0 §Stomp Protocol Specification",
                "After the client sends the CONNECT frame, the server will always acknowledge "
                "the connection, by sending a frame which looks like: CONNECTED session: "
                "<session-id>",
            )
        },
        also=_V11,
    ),
    "connected-version": Clause(
        "1.2 §CONNECTED Frame",
        "STOMP 1.2 servers MUST set the following headers: version : The version of the STOMP "
        "protocol the session will be using.",
        {
            "1.1": (
                "1.1 §CONNECTED Frame",
                "STOMP 1.1 servers MUST set the following headers: version : The version of the "
                "STOMP protocol the session will be using.",
            )
        },
    ),
    "server-header": Clause(
        "1.2 §CONNECTED Frame",
        "server : A field that contains information about the STOMP server. The field MUST "
        "contain a server-name field and MAY be followed by optional comment fields delimited "
        "by a space octet.",
        {
            "1.1": (
                "1.1 §CONNECTED Frame",
                "server : A field that contains information about the STOMP server. The field "
                "MUST contain a server-name field and MAY be followed by optional comment feilds "
                "delimited by a space character.",
            )
        },
    ),
    "stomp-frame": Clause(
        "1.2 §CONNECT or STOMP Frame",
        "STOMP servers MUST handle a STOMP frame in the same manner as a CONNECT frame.",
        {
            "1.1": (
                "1.1 §CONNECT or STOMP Frame",
                "STOMP servers SHOULD handle a STOMP frame in the same manner as a CONNECT frame.",
            )
        },
    ),
    "negotiation": Clause(
        "1.2 §Protocol Negotiation",
        "The protocol that will be used for the rest of the session will be the highest "
        "protocol version that both the client and server have in common.",
        also=_V11,
    ),
    "negotiation-missing": Clause(
        "1.2 §Protocol Negotiation",
        "If the accept-version header is missing, it means that the client only supports "
        "version 1.0 of the protocol.",
        also=_V11,
    ),
    "negotiation-none": Clause(
        "1.2 §Protocol Negotiation",
        "If the client and server do not share any common protocol versions, then the server "
        "MUST respond with an ERROR frame similar to the following and then close the "
        "connection",
        {
            "1.1": (
                "1.1 §Protocol Negotiation",
                "If the client and server do not share any common protocol versions, then the "
                "server SHOULD respond with an ERROR frame similar to:",
            )
        },
        remark="The version header listing the server's versions is in the spec's example "
        "of that ERROR, not in a rule.",
    ),
    "reject-connect": Clause(
        "1.2 §Connecting",
        "The server can reject any connection attempt. The server SHOULD respond back with an "
        "ERROR frame explaining why the connection was rejected and then close the "
        "connection.",
        {
            "1.1": (
                "1.1 §Connecting",
                "The server can reject any connection attempt. The server SHOULD respond back "
                "with an ERROR frame listing why the connection was rejected and then close the "
                "connection.",
            )
        },
    ),
    "vhost": Clause(
        "1.2 §CONNECT or STOMP Frame",
        "If this header does not match a known virtual host, servers supporting virtual "
        "hosting MAY select a default virtual host or reject the connection.",
        also=_V11,
    ),
    "heart-beat-header": Clause(
        "1.2 §Heart-beating",
        "When used, the heart-beat header MUST contain two positive integers separated by a comma.",
        also=_V11,
    ),
    "heart-beat-rate": Clause(
        "1.2 §Heart-beating",
        "if <cx> is 0 (the client cannot send heart-beats) or <sy> is 0 (the server does not "
        "want to receive heart-beats) then there will be none otherwise, there will be "
        "heart-beats every MAX(<cx>,<sy>) milliseconds In the other direction, <sx> and <cy> "
        "are used the same way.",
        also=_V11,
    ),
    "heart-beat-send": Clause(
        "1.2 §Heart-beating",
        "the sender MUST send new data over the network connection at least every <n> "
        "milliseconds if the sender has no real STOMP frame to send, it MUST send an "
        "end-of-line (EOL)",
        {
            "1.1": (
                "1.1 §Heart-beating",
                "the sender MUST send new data over the network connection at least every <n> "
                "milliseconds if the sender has no real STOMP frame to send, it MUST send a "
                "single newline byte (0x0A)",
            )
        },
    ),
    "heart-beat-missing": Clause(
        "1.2 §Heart-beating",
        'A missing heart-beat header MUST be treated the same way as a "heart-beat:0,0" '
        "header, that is: the party cannot send and does not want to receive heart-beats.",
        also=_V11,
    ),
    "heart-beat-dead": Clause(
        "1.2 §Heart-beating",
        "if, inside a time window of at least <n> milliseconds, the receiver did not receive "
        "any new data, it MAY consider the connection as dead",
        {
            "1.1": (
                "1.1 §Heart-beating",
                "if, inside a time window of at least <n> milliseconds, the receiver did not "
                "receive any new data, it CAN consider the connection as dead",
            )
        },
        remark="STOMP 1.1 writes CAN, which is no RFC 2119 keyword: its case only records "
        "what the broker did.",
    ),
    "heart-beat-tolerant": Clause(
        "1.2 §Heart-beating",
        "because of timing inaccuracies, the receiver SHOULD be tolerant and take into account "
        "an error margin",
        also=_V11,
    ),
    "error-close": Clause(
        "1.2 §ERROR",
        "The server MAY send ERROR frames if something goes wrong. In this case, it MUST then "
        "close the connection just after sending the ERROR frame.",
    ),
    "error-may": Clause(
        "1.2 §ERROR",
        "The server MAY send ERROR frames if something goes wrong.",
        {"1.0": ("1.0 §ERROR", "The server may send ERROR frames if something goes wrong.")},
        also=_V11,
    ),
    "error-message": Clause(
        "1.2 §ERROR",
        "The ERROR frame SHOULD contain a message header with a short description of the "
        "error, and the body MAY contain more detailed information (or MAY be empty).",
        {
            "1.1": (
                "1.1 §ERROR",
                "The error frame SHOULD contain a message header with a short description of the "
                "error, and the body MAY contain more detailed information (or MAY be empty).",
            ),
            "1.0": (
                "1.0 §ERROR",
                "The error frame should contain a message header with a short description of the "
                "error, and the body may contain more detailed information (or may be empty).",
            ),
        },
    ),
    "error-receipt-id": Clause(
        "1.2 §ERROR",
        "if the frame included a receipt header, the ERROR frame SHOULD set the receipt-id "
        "header to match the value of the receipt header of the frame which the error is "
        "related to.",
        also=_V11,
    ),
    "send-error": Clause(
        "1.2 §SEND",
        "If the server cannot successfully process the SEND frame for any reason, the server "
        "MUST send the client an ERROR frame and then close the connection.",
        {
            "1.1": (
                "1.1 §SEND",
                "If the server cannot successfully process the SEND frame for any reason, the "
                "server MUST send the client an ERROR frame and disconnect the client.",
            )
        },
    ),
    "subscribe-error": Clause(
        "1.2 §SUBSCRIBE",
        "If the server cannot successfully create the subscription, the server MUST send the "
        "client an ERROR frame and then close the connection.",
        {
            "1.1": (
                "1.1 §SUBSCRIBE",
                "If the server cannot successfully create the subscription, the server MUST "
                "send the client an ERROR frame and disconnect the client.",
            )
        },
    ),
    "send-user-headers": Clause(
        "1.2 §SEND",
        "An application MAY add any arbitrary user defined headers to the SEND frame. [...] "
        "The user defined headers MUST be passed through in the MESSAGE frame.",
        also=_V11,
    ),
    "subscribe-id": Clause(
        "1.2 §SUBSCRIBE id Header",
        "an id header MUST be included in the frame to uniquely identify the subscription. "
        "The id header allows the client and server to relate subsequent MESSAGE or "
        "UNSUBSCRIBE frames to the original subscription.",
        {
            "1.1": (
                "1.1 §SUBSCRIBE id Header",
                "An id header MUST be included in the frame to uniquely identify the "
                "subscription within the STOMP connection session.",
            )
        },
    ),
    "ack-auto": Clause(
        "1.2 §SUBSCRIBE ack Header",
        "If the header is not set, it defaults to auto. When the ack mode is auto, then the "
        "client does not need to send the server ACK frames for the messages it receives.",
        {"1.0": ("1.0 §SUBSCRIBE", "The ack header is optional, and defaults to auto.")},
        also=_V11,
    ),
    "ack-client": Clause(
        "1.2 §SUBSCRIBE ack Header",
        "The ACK frames sent by the client will be treated as a cumulative acknowledgment. "
        "This means the acknowledgment operates on the message specified in the ACK frame and "
        "all messages sent to the subscription before the ACK'ed message.",
        {
            "1.1": (
                "1.1 §SUBSCRIBE ack Header",
                "The ACK frames sent by the client will be treated as a cumulative ACK. This "
                "means the ACK operates on the message specified in the ACK frame and all "
                "messages sent to the subscription before the ACK-ed message.",
            ),
        },
        remark="STOMP 1.0 says only that client-mode messages count as delivered once "
        "acknowledged, not whether an ACK settles the earlier ones too.",
    ),
    "ack-client-individual": Clause(
        "1.2 §SUBSCRIBE ack Header",
        "an ACK or NACK frame for a subsequent message MUST NOT cause a previous message to "
        "get acknowledged.",
        {
            "1.1": (
                "1.1 §SUBSCRIBE ack Header",
                "an ACK or NACK for a subsequent message MUST NOT cause a previous message to "
                "get acknowledged.",
            )
        },
    ),
    "unsubscribe": Clause(
        "1.2 §UNSUBSCRIBE",
        "Once the subscription is removed the STOMP connections will no longer receive "
        "messages from that subscription.",
        {
            "1.1": (
                "1.1 §UNSUBSCRIBE",
                "Once the subscription is removed the STOMP connections will no longer receive "
                "messages from that destination.",
            )
        },
    ),
    "ack-id": Clause(
        "1.2 §ACK",
        "The ACK frame MUST include an id header matching the ack header of the MESSAGE being "
        "acknowledged.",
        {
            "1.1": (
                "1.1 §ACK",
                "ACK has two REQUIRED headers: message-id, which MUST contain a value matching "
                "the message-id for the MESSAGE being acknowledged and subscription, which MUST "
                "be set to match the value of the subscription's id header.",
            ),
            "1.0": (
                "1.0 §ACK",
                "ACK has one required header, message-id, which must contain a value matching "
                "the message-id for the MESSAGE being acknowledged.",
            ),
        },
    ),
    "nack": Clause(
        "1.2 §NACK",
        "NACK is the opposite of ACK. [...] The server can then either send the message to a "
        "different client, discard it, or put it in a dead letter queue. The exact behavior "
        "is server specific.",
        also=_V11,
    ),
    "transaction": Clause(
        "1.2 §BEGIN",
        "Transactions in this case apply to sending and acknowledging - any messages sent or "
        "acknowledged during a transaction will be processed atomically based on the "
        "transaction.",
        {
            "1.1": (
                "1.1 §BEGIN",
                "Transactions in this case apply to sending and acknowledging - any messages "
                "sent or acknowledged during a transaction will be handled atomically based on "
                "the transaction.",
            ),
            "1.0": (
                "1.0 §BEGIN",
                "Transactions in this case apply to sending and acknowledging - any messages "
                "sent or acknowledged during a transaction will be handled atomically based on "
                "the transaction.",
            ),
        },
    ),
    "transaction-ack": Clause(
        "1.2 §ACK",
        "Optionally, a transaction header MAY be specified, indicating that the message "
        "acknowledgment SHOULD be part of the named transaction.",
        {
            "1.0": (
                "1.0 §ACK",
                "transaction header may be specified, indicating that the message "
                "acknowledgment should be part of the named transaction.",
            )
        },
        also=_V11,
    ),
    "transaction-abort": Clause(
        "1.2 §ABORT", "ABORT is used to roll back a transaction in progress.", also=_ALL_OLDER
    ),
    "transaction-implicit-abort": Clause(
        "1.2 §BEGIN",
        "Any started transactions which have not been committed will be implicitly aborted if "
        "the client sends a DISCONNECT frame or if the TCP connection fails for any reason.",
        also=_V11,
    ),
    "transaction-unknown": Clause(
        "1.2 §COMMIT",
        "The transaction header is REQUIRED and MUST specify the identifier of the transaction "
        "to commit.",
        {
            "1.1": (
                "1.1 §COMMIT",
                "The transaction header is REQUIRED and MUST specify the id of the transaction "
                "to commit!",
            ),
        },
        remark="The header names a transaction of the session: a COMMIT of one never begun "
        "names none.",
    ),
    "message-headers": Clause(
        "1.2 §MESSAGE",
        "The MESSAGE frame MUST also contain a message-id header with a unique identifier for "
        "that message and a subscription header matching the identifier of the subscription "
        "that is receiving the message.",
        {
            "1.1": (
                "1.1 §MESSAGE",
                "It will also contain a message-id header with a unique identifier for that "
                "message. The subscription header will be set to match the id header of the "
                "subscription that is receiving the message.",
            ),
            "1.0": (
                "1.0 §MESSAGE",
                "The MESSAGE frame will include a header, destination, indicating the "
                "destination the message was delivered to. It will also contain a message-id "
                "header with a unique identifier for that message.",
            ),
        },
    ),
    "message-destination": Clause(
        "1.2 §MESSAGE",
        "The MESSAGE frame MUST include a destination header indicating the destination the "
        "message was sent to. If the message has been sent using STOMP, this destination "
        "header SHOULD be identical to the one used in the corresponding SEND frame.",
        {
            "1.1": (
                "1.1 §MESSAGE",
                "The MESSAGE frame will include a destination header indicating the destination "
                "the message was sent to.",
            ),
        },
        remark="STOMP 1.1 states that the header is there, not that it names the SEND's "
        "destination (1.2 asks for that with SHOULD).",
    ),
    "message-ack": Clause(
        "1.2 §MESSAGE",
        "If the message is received from a subscription that requires explicit "
        "acknowledgment (either client or client-individual mode) then the MESSAGE frame MUST "
        "also contain an ack header with an arbitrary value.",
    ),
    "server-headers": Clause(
        "1.2 §MESSAGE",
        "MESSAGE frames will also include all user defined headers that were present when the "
        "message was sent to the destination in addition to the server specific headers that "
        "MAY get added to the frame.",
        also=_V11,
    ),
    "destination-opaque": Clause(
        "1.2 §SEND",
        "Note that STOMP treats this destination as an opaque string and no delivery "
        "semantics are assumed by the name of a destination.",
        also=_V11,
    ),
    "before-connect": Clause(
        "1.2 §Connecting",
        "A STOMP client initiates the stream or TCP connection to the server by sending the "
        "CONNECT frame",
        also=_V11,
    ),
    "unknown-command": Clause(
        "1.2 §Client Frames",
        "A client MAY send a frame not in this list, but for such a frame a STOMP 1.2 server "
        "MAY respond with an ERROR frame and then close the connection.",
    ),
    "websocket": Clause(
        _FRAME,
        "STOMP is a frame based protocol which assumes a reliable 2-way streaming network "
        "protocol (such as TCP) underneath.",
        also=_V11,
        remark="Over WebSocket, the STOMP frames travel in WebSocket messages; the "
        "subprotocols are v10.stomp, v11.stomp and v12.stomp.",
    ),
    "stream-offset": Clause(
        "1.2 §SUBSCRIBE",
        "STOMP servers MAY support additional server specific headers to customize the "
        "delivery semantics of the subscription.",
        also=_V11,
        remark="RabbitMQ streams take x-stream-offset.",
    ),
}
