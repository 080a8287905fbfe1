"""stomp.py's interactive command-line client on the layer: ``python -m stomp_proto.stomppy``.

(stomp.py has it in ``stomp.__main__``, which re-exports these names here too.)

The commands and options are stomp.py's (``subscribe``, ``send``, ``sendfile``,
``begin``/``commit``, ``stats``, ``run FILE``; ``-H``, ``-P``, ``-U``, ``-W``,
``-S``, ``-L``, ``-F``, ``--ssl`` ...), so a script written for ``python -m
stomp`` runs unchanged; :class:`StompCLI` is the same ``cmd.Cmd`` shell for a
program that drives it.  What arrives (CONNECTED, MESSAGE, RECEIPT, ERROR) is
printed with its headers (only ``message-id`` and ``subscription`` unless
verbose); a MESSAGE with a ``filename`` header is a file sent by ``sendfile``,
saved in the current directory.

Where it differs from stomp.py: the passcode is never printed (the ``Sending``
lines mask it, as the layer's log does), and ``-W`` may be left out and the
password read from ``STOMP_PASSWORD``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import cmd
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from . import __version__, colours
from .adapter.multicast import MulticastConnection
from .connect import BaseConnection, StompConnection10, StompConnection11, StompConnection12
from .listener import ConnectionListener, StatsListener
from .utils import Frame, clean_headers

__all__ = ["StompCLI", "main"]

_HEARTBEATS = re.compile(r"^\d+,\d+$")


@dataclass
class _Subscribed:
    id: str
    ack: str


class StompCLI(cmd.Cmd, ConnectionListener):
    """A ``cmd.Cmd`` shell over one connection, as stomp.py's ``stomp.__main__.StompCLI``.

    ``ver`` is ``"1.0"``, ``"1.1"``, ``"1.2"`` or ``"multicast"`` (a
    :class:`~stomp_proto.stomppy.adapter.multicast.MulticastConnection`, no
    broker); anything else is a ``RuntimeError``.  The connection is made (and
    waited for) by the constructor.
    """

    def __init__(
        self,
        host: str | None = "localhost",
        port: int | str | None = 61613,
        user: str | None = "",
        passcode: str | None = "",
        ver: str = "1.1",
        prompt: str = "> ",
        verbose: bool = True,
        heartbeats: tuple[int, int] = (0, 0),
        use_ssl: bool = False,
        ssl_key_file: str | None = None,
        ssl_cert_file: str | None = None,
        ssl_ca_file: str | None = None,
        stdin: Any = None,
        stdout: Any = None,
    ) -> None:
        cmd.Cmd.__init__(self, "Tab", stdin, stdout)  # None: sys.stdin, sys.stdout
        ConnectionListener.__init__(self)
        #: Printed before each command is read ("" when commands come from a file).
        self.prompt = prompt
        #: Print every header of what arrives (else ``message-id`` and ``subscription``).
        self.verbose = verbose
        #: The STOMP version asked for (``"1.0"`` ... or ``"multicast"``).
        self.version = ver
        #: The transaction begun with ``begin`` (None outside one).
        self.transaction_id: str | None = None
        self._quitting = False
        self._subscriptions: dict[str, _Subscribed] = {}
        self._next_id = 1
        self._stats: StatsListener | None = None
        address = [(host or "localhost", int(port or 61613))]
        #: The connection the shell drives.
        self.conn: BaseConnection = self._connection(ver, address, heartbeats)
        if use_ssl:
            self.conn.set_ssl(
                address, key_file=ssl_key_file, cert_file=ssl_cert_file, ca_certs=ssl_ca_file
            )
        self.conn.set_listener("", self)
        self.conn.connect(user, passcode, wait=True)  # type: ignore[attr-defined]

    @staticmethod
    def _connection(
        ver: str, address: list[tuple[str, int]], heartbeats: tuple[int, int]
    ) -> BaseConnection:
        if ver == "1.0":
            return StompConnection10(address)
        if ver == "1.1":
            return StompConnection11(address, heartbeats=heartbeats)
        if ver == "1.2":
            return StompConnection12(address, heartbeats=heartbeats)
        if ver == "multicast":
            return MulticastConnection()
        raise RuntimeError(f"unknown STOMP version {ver!r} (1.0, 1.1, 1.2 or multicast)")

    # -- output ----------------------------------------------------------------

    def _say(self, text: object, end: str = "\n") -> None:
        if not self._quitting:
            self.stdout.write(f"{text}{end}")

    def _complain(self, text: str) -> None:
        self.stdout.write(f"{colours.BOLD}{colours.RED}{text}{colours.NO_COLOUR}\n")

    def _show(self, command: str, frame: Frame) -> None:
        """Print a frame that arrived, then the prompt again."""
        if self._quitting:
            return
        shown = frame.headers.items() if self.verbose else (
            (name, value) for name, value in frame.headers.items()
            if name in ("message-id", "subscription")
        )  # fmt: skip
        lines = [command] if self.verbose else []
        lines += [f"{name}: {value}" for name, value in shown]
        for line in lines:
            self._say(line)
        if self.prompt:
            self._say("")
        body = frame.body
        if isinstance(body, bytes):  # a connection without auto_decode (multicast)
            body = body.decode(self.conn.transport.encoding, "replace")
        self._say(body)
        self._say(self.prompt, end="")
        self.stdout.flush()

    # -- what arrives ----------------------------------------------------------

    def on_connected(self, frame: Frame) -> None:
        self._show("CONNECTED", frame)

    def on_message(self, frame: Frame) -> None:
        if "filename" in frame.headers:
            frame.body = "Saved file: " + self._save(frame)
        self._show("MESSAGE", frame)

    def on_receipt(self, frame: Frame) -> None:
        self._show("RECEIPT", frame)

    def on_error(self, frame: Frame) -> None:
        self._show("ERROR", frame)

    def on_disconnected(self) -> None:
        if not self._quitting:
            self._complain("lost connection")

    def on_send(self, frame: Frame) -> None:
        if self.verbose:
            shown = Frame(frame.cmd, dict(clean_headers(frame.headers)), frame.body)
            self._say(f"Sending {shown}")

    @staticmethod
    def _save(frame: Frame) -> str:
        """Write a file that ``sendfile`` sent (base64 in the body); the name it got."""
        body = frame.body if isinstance(frame.body, bytes) else str(frame.body).encode()
        try:
            content = base64.b64decode(body, validate=True)
        except binascii.Error:
            content = body  # not sent by sendfile: saved as it came
        name = os.path.basename(str(frame.headers["filename"])) or "message"
        if os.path.exists(name):  # never overwrite: a time stamp makes a new name
            name = f"{name}.{int(time.time())}"
        with open(name, "wb") as file:
            file.write(content)
        return name

    # -- commands --------------------------------------------------------------

    def default(self, line: str) -> None:
        self._complain(f"Unknown command: {line.split()[0]}")

    def emptyline(self) -> bool:
        return False  # an empty line does nothing (cmd's default repeats the last command)

    def do_quit(self, args: str) -> bool:
        """``quit``: disconnect (waiting for the receipt) and end the shell."""
        self._say("Shutting down, please wait")
        self._quitting = True
        self.conn.disconnect()  # type: ignore[attr-defined]
        return True

    do_exit = do_quit
    do_EOF = do_quit

    def do_subscribe(self, args: str) -> None:
        """``subscribe DESTINATION [ACK]``: subscribe (ids 1, 2, ...; ack ``auto`` by default)."""
        words = args.split()
        if not words:
            self._complain("Expecting: subscribe <destination> [ack]")
            return
        destination, ack = words[0], words[1] if len(words) > 1 else "auto"
        if destination in self._subscriptions:
            self._complain(f"Already subscribed to {destination}")
            return
        sid = str(self._next_id)
        self._next_id += 1
        self._subscriptions[destination] = _Subscribed(sid, ack)
        self._say(
            f"Subscribing to '{destination}' with acknowledge set to '{ack}', id set to '{sid}'"
        )
        self.conn.subscribe(destination=destination, ack=ack, id=sid)  # type: ignore[attr-defined]

    def do_unsubscribe(self, args: str) -> None:
        """``unsubscribe DESTINATION``: end that subscription."""
        words = args.split()
        if not words:
            self._complain("Expecting: unsubscribe <destination>")
            return
        subscribed = self._subscriptions.pop(words[0], None)
        if subscribed is None:
            self._say(f"Subscription {words[0]} not found")
            return
        self._say(f"Unsubscribing from '{words[0]}'")
        self.conn.unsubscribe(destination=words[0], id=subscribed.id)  # type: ignore[attr-defined]

    def _send(self, destination: str, body: Any, **headers: Any) -> None:
        if self.transaction_id is not None:
            headers["transaction"] = self.transaction_id
        self.conn.send(destination, body, **headers)  # type: ignore[attr-defined]

    def do_send(self, args: str) -> None:
        """``send DESTINATION TEXT``: send the text (in the transaction begun, if any)."""
        words = args.split()
        if len(words) < 2:
            self._complain("Expecting: send <destination> <message>")
            return
        self._send(words[0], " ".join(words[1:]))

    def do_sendrec(self, args: str) -> None:
        """``sendrec DESTINATION TEXT``: send and ask for a receipt."""
        words = args.split()
        if len(words) < 2:
            self._complain("Expecting: sendrec <destination> <message>")
            return
        self._send(words[0], " ".join(words[1:]), receipt=f"receipt-{time.monotonic_ns()}")

    def do_sendreply(self, args: str) -> None:
        """``sendreply DESTINATION CORRELATION-ID TEXT``: send a reply."""
        words = args.split()
        if len(words) < 3:
            self._complain("Expecting: sendreply <destination> <correlation-id> <message>")
            return
        self._send(words[0], " ".join(words[2:]) + "\n", **{"correlation-id": words[1]})

    def do_sendfile(self, args: str) -> None:
        """``sendfile DESTINATION FILE [HEADERS]``: send a file (base64, ``filename`` header)."""
        words = args.split(maxsplit=2)
        if len(words) < 2:
            self._complain("Expecting: sendfile <destination> <filename> [headers.json]")
            return
        destination, filename = words[0], words[1]
        if not os.path.exists(filename):
            self._complain(f"File {filename} does not exist")
            return
        headers = self._headers_of(words[2]) if len(words) > 2 else {}
        if headers is None:
            return
        with open(filename, "rb") as file:
            body = base64.b64encode(file.read()).decode("ascii")
        self._send(destination, body, headers=headers, filename=os.path.basename(filename))

    def _headers_of(self, given: str) -> dict[str, Any] | None:
        """Extra headers for ``sendfile``: a JSON object, inline or in a file."""
        text = given
        if not given.lstrip().startswith("{"):
            if not os.path.exists(given):
                self._complain(f"File {given} does not exist")
                return None
            self._say(f"Loading {given}")
            with open(given, encoding="utf-8") as file:
                text = file.read()
        try:
            headers = json.loads(text)
        except ValueError as exc:
            self._complain(f"Headers are not JSON: {exc}")
            return None
        if not isinstance(headers, dict):
            self._complain("Headers are not a JSON object")
            return None
        self._say(f"Using headers {headers}")
        return headers

    def do_version(self, args: str) -> None:
        """``version``: the client's version and the STOMP version asked for."""
        self._say(
            f"{colours.BOLD}stomp_proto.stomppy {__version__} "
            f"[Protocol version {self.version}]{colours.NO_COLOUR}"
        )

    do_ver = do_version

    def _settle(self, verb: str, send: Callable[..., None], args: str) -> None:
        # The ids each version's ack and nack take (1.0 and multicast: the message's).
        ids = {"1.2": "<ack-id>", "1.1": "<message-id> <subscription-id>"}.get(
            self.version, "<message-id>"
        )
        words = args.split()
        if len(words) != len(ids.split()):
            self._complain(f"Expecting: {verb} {ids}")
            return
        send(*words, transaction=self.transaction_id)

    def do_ack(self, args: str) -> None:
        """``ack ID [SUBSCRIPTION]``: acknowledge (the ids each version needs)."""
        self._settle("ack", self.conn.ack, args)  # type: ignore[attr-defined]

    def do_nack(self, args: str) -> None:
        """``nack ID [SUBSCRIPTION]``: refuse a message (1.1 and later)."""
        nack = getattr(self.conn, "nack", None)
        if nack is None:
            self._complain("nack needs STOMP 1.1 or later")
            return
        self._settle("nack", nack, args)

    def do_begin(self, args: str) -> None:
        """``begin``: begin a transaction for the sends and acks that follow."""
        if self.transaction_id is not None:
            self._complain(f"Currently in a transaction ({self.transaction_id})")
            return
        self.transaction_id = self.conn.begin()  # type: ignore[attr-defined]
        self._say(f"Transaction id: {self.transaction_id}")

    def do_commit(self, args: str) -> None:
        """``commit``: commit the transaction begun."""
        if self.transaction_id is None:
            self._complain("Not currently in a transaction")
            return
        self._say(f"Committing {self.transaction_id}")
        self.conn.commit(transaction=self.transaction_id)  # type: ignore[attr-defined]
        self.transaction_id = None

    def do_abort(self, args: str) -> None:
        """``abort``: abort the transaction begun."""
        if self.transaction_id is None:
            self._complain("Not currently in a transaction")
            return
        self.conn.abort(transaction=self.transaction_id)  # type: ignore[attr-defined]
        self._say(f"Aborted transaction: {self.transaction_id}")
        self.transaction_id = None

    def do_stats(self, args: str) -> None:
        """``stats [on|off]``: count what arrives, stop, or print the counts."""
        word = args.strip()
        if word == "on":
            self._stats = StatsListener()
            self.conn.set_listener("stats", self._stats)
        elif word == "off":
            self.conn.remove_listener("stats")
            self._stats = None
        elif self._stats is None:
            self._say("No stats available")
        else:
            self._say(str(self._stats))

    def do_run(self, args: str) -> None:
        """``run FILE``: run the commands of a file, one per line."""
        filename = args.strip()
        if not filename:
            self._complain("Expecting: run <filename>")
            return
        if not os.path.exists(filename):
            self._complain(f"File {filename} does not exist")
            return
        with open(filename, encoding="utf-8") as file:
            for line in file:
                self.onecmd(line.rstrip("\n"))

    # -- help ------------------------------------------------------------------

    def _usage(self, usage: str, description: str, required: Sequence[str] = (),
               optional: Sequence[str] = ()) -> None:  # fmt: skip
        lines = [f"{colours.BOLD}Usage:{colours.NO_COLOUR}", f"\t{usage}", "",
                 f"{colours.BOLD}Description:{colours.NO_COLOUR}", f"\t{description}"]  # fmt: skip
        if required:
            lines += ["", f"{colours.BOLD}Required Parameters:{colours.NO_COLOUR}"]
            lines += [f"\t{text}" for text in required]
        if optional:
            lines += ["", f"{colours.BOLD}Optional Parameters:{colours.NO_COLOUR}"]
            lines += [f"\t{text}" for text in optional]
        self._say("\n".join(lines) + "\n")

    def help_help(self) -> None:
        self._say("Quick help on commands")

    def help_quit(self) -> None:
        self._usage("exit", "Disconnect (waiting for the broker's receipt) and leave.")

    help_exit = help_quit

    def help_EOF(self) -> None:
        self._usage("exit", "Disconnect and leave (end of input, CTRL-D).")

    def help_subscribe(self) -> None:
        self._usage(
            "subscribe <destination> [ack]",
            "Receive the messages of a destination; each is printed as it arrives.",
            ["destination - where to subscribe, e.g. /queue/test"],
            ["ack - auto (the default), client or client-individual"],
        )

    def help_unsubscribe(self) -> None:
        self._usage(
            "unsubscribe <destination>",
            "End the subscription to a destination.",
            ["destination - as given to subscribe"],
        )

    def help_send(self) -> None:
        self._usage(
            "send <destination> <message>",
            "Send the rest of the line as a message (inside the transaction begun, if any).",
            ["destination - where to send", "message - the text"],
        )

    def help_sendrec(self) -> None:
        self._usage(
            "sendrec <destination> <message>",
            "Send a message and ask for a receipt, which is printed when it comes.",
            ["destination - where to send", "message - the text"],
        )

    def help_sendreply(self) -> None:
        self._usage(
            "sendreply <destination> <correlation-id> <message>",
            "Send a reply: the message with a correlation-id header.",
            ["destination - where to send", "correlation-id - of the request",
             "message - the text"],
        )  # fmt: skip

    def help_sendfile(self) -> None:
        self._usage(
            "sendfile <destination> <filename> [headers.json]",
            "Send a file (base64, with a filename header); a receiving shell saves it.",
            ["destination - where to send", "filename - the file to send"],
            ["headers.json - extra headers: a JSON object, inline or in a file"],
        )

    def help_version(self) -> None:
        self._usage("version", "Show the client's version and the STOMP version in use.")

    help_ver = help_version

    def help_ack(self) -> None:
        self._usage(
            "ack <ack-id> (1.2) | ack <message-id> <subscription-id> (1.1) | ack <message-id>",
            "Acknowledge a message received on a subscription with ack client or "
            "client-individual.",
        )

    def help_nack(self) -> None:
        self._usage(
            "nack <ack-id> (1.2) | nack <message-id> <subscription-id> (1.1)",
            "Refuse a message received on a subscription with ack client or "
            "client-individual (STOMP 1.1 and later).",
        )

    def help_begin(self) -> None:
        self._usage(
            "begin",
            "Begin a transaction: the sends and acks that follow take effect at commit, "
            "or never, at abort.",
        )

    def help_commit(self) -> None:
        self._usage("commit", "Commit the transaction begun.")

    def help_abort(self) -> None:
        self._usage("abort", "Abort the transaction begun: its sends and acks are dropped.")

    def help_stats(self) -> None:
        self._usage(
            "stats [on|off]",
            "Count what arrives (on), stop counting (off), or print the counts.",
        )

    def help_run(self) -> None:
        self._usage(
            "run <filename>", "Run the commands of a file, one per line.",
            ["filename - the file of commands"],
        )  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m stomp_proto.stomppy",
        description="stomp.py's interactive STOMP client, on stomp_proto.",
    )
    add = parser.add_argument
    add("--version", action="version", version=f"stomp_proto.stomppy {__version__}")
    add("-H", "--host", default="localhost", help="host to connect to (default: localhost)")
    add("-P", "--port", type=int, default=61613, help="the broker's port (default: 61613)")
    add("-U", "--user", help="user name to log in with")
    add("-W", "--password", help="password (default: $STOMP_PASSWORD)")
    add("-F", "--file", help="run the commands of this file, then leave")
    add("-S", "--protocol", default="1.1", choices=("1.0", "1.1", "1.2", "multicast"),
        help="STOMP version (default: 1.1)")  # fmt: skip
    add("-L", "--listen", metavar="DESTINATION", help="subscribe and print what arrives")
    add("-V", "--verbose", action="store_true", help="print every header of what arrives")
    add("--heartbeats", default="0,0", help="heart-beats asked for, 'send,receive' ms (1.1+)")
    add("--ssl", action="store_true", help="connect with TLS")
    add("--ssl-key-file", help="client key file")
    add("--ssl-cert-file", help="client certificate file")
    add("--ssl-ca-file", help="file of CA certificates to verify the broker with")
    return parser


def main(argv: Sequence[str] | None = None, stdin: IO[str] | None = None) -> int:
    """Run the shell as ``python -m stomp`` does; the exit status."""
    args = _parser().parse_args(argv)
    if not _HEARTBEATS.match(args.heartbeats):
        print("--heartbeats needs two integers separated by a comma", file=sys.stderr)
        return 2
    send, receive = (int(n) for n in args.heartbeats.split(","))
    interactive = args.listen is None and args.file is None
    shell = StompCLI(
        args.host, args.port, args.user, args.password or os.environ.get("STOMP_PASSWORD"),
        args.protocol, "> " if interactive else "", args.verbose, heartbeats=(send, receive),
        use_ssl=args.ssl, ssl_key_file=args.ssl_key_file, ssl_cert_file=args.ssl_cert_file,
        ssl_ca_file=args.ssl_ca_file, stdin=stdin or sys.stdin,
    )  # fmt: skip
    try:
        if args.listen is not None:
            shell.do_subscribe(args.listen)
            while shell.conn.is_connected():  # until interrupted or the broker goes
                time.sleep(0.2)
        elif args.file is not None:
            shell.do_run(args.file)
        else:
            if stdin is not None:
                shell.use_rawinput = False
            shell.cmdloop()
            return 0
    except KeyboardInterrupt:
        pass
    shell.do_quit("")
    return 0
