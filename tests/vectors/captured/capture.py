"""Capture what RabbitMQ and ActiveMQ send for the scripted sessions of sessions.py.

Usage (the brokers must be running: ``scripts/start-brokers.sh``)::

    .venv/bin/python tests/vectors/captured/capture.py [--broker rabbitmq] [SESSION ...]

For every broker, session and version it writes, next to this file,
``<broker>/<session>-<version>.server.bin`` (the broker's bytes, exactly as
received), ``.client.bin`` (ours) and an entry of ``index.json``: the broker's
``server`` header, the destinations used, and the length of each step's client
and server bytes.  Re-run it after changing sessions.py, and commit the result;
``tests/test_captured_vectors.py`` reads these files offline.
"""

from __future__ import annotations

import argparse
import datetime
import json
import socket
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent)]  # sessions.py, tests/brokers.py

import brokers  # noqa: E402
from sessions import CLOSE, SESSIONS, Context, Names, Session, Step  # noqa: E402

from stomp_proto import (  # noqa: E402
    ClientConnection,
    Event,
    Frame,
    FrameDecoder,
    HeartBeat,
    ProtocolError,
    Version,
)

INDEX = HERE / "index.json"
#: Seconds to keep reading after the expected frames, for the EOL after each NUL.
QUIET = 0.2
#: Longest wait for the expected frames (or for the broker to close).
PATIENCE = 5.0


class Capture:
    """One session against one broker: a socket, a decoder counting frames, a client."""

    def __init__(self, endpoint: brokers.Endpoint, version: Version, names: Names) -> None:
        self.endpoint = endpoint
        self.version = version
        self.names = names
        self.sock = socket.create_connection(("127.0.0.1", endpoint.port), timeout=PATIENCE)
        self.decoder = FrameDecoder(version)
        self.conn: ClientConnection | None = ClientConnection()
        self.events: list[Event] = []
        self.frames: list[str] = []
        self.closed = False
        self.client = bytearray()
        self.server = bytearray()
        self.steps: list[list[int]] = []

    def run_step(self, step: Step) -> None:
        ctx = Context(self.version, self.names, self.endpoint.vhost, tuple(self.events))
        out = bytearray()
        for item in step.send(ctx):
            if isinstance(item, bytes):
                out += item
            else:
                assert self.conn is not None, "a typed event after the session ended"
                out += self.conn.send(item)
        self.sock.sendall(out)
        received = bytearray()
        wanted = len(self.frames) + step.expect
        deadline = time.monotonic() + PATIENCE
        while not self.closed and (step.expect == CLOSE or len(self.frames) < wanted):
            if not self._read(received, deadline - time.monotonic()):
                if step.expect == CLOSE:
                    break
                raise TimeoutError(f"{len(self.frames)} frames, wanted {wanted}: {received!r}")
        idle_until = time.monotonic() + step.idle
        while not self.closed and time.monotonic() < idle_until:
            self._read(received, idle_until - time.monotonic())
        while not self.closed and self._read(received, QUIET):
            pass
        self.client += out
        self.server += received
        self.steps.append([len(out), len(received)])

    def _read(self, into: bytearray, timeout: float) -> bool:
        if timeout <= 0:
            return False
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except ConnectionResetError:
            data = b""
        into += data
        self.closed = not data
        self.decoder.receive_data(data or None)
        while (frame := self.decoder.next_frame()) is not None:
            if isinstance(frame, Frame):
                self.frames.append(frame.command)
        if self.conn is not None:
            try:
                self.conn.receive_data(data or None)
                while (event := self.conn.next_event()) is not None:
                    if not isinstance(event, HeartBeat):
                        self.events.append(event)
            except ProtocolError:
                self.conn = None  # e.g. data after an ERROR: the client would have stopped
        return True


def capture(
    name: str, session: Session, endpoint: brokers.Endpoint, version: Version
) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    names = Names(queue=f"/queue/capture-{name}-{tag}", topic=f"/topic/capture-{name}-{tag}")
    cap = Capture(endpoint, version, names)
    try:
        for step in session.steps:
            cap.run_step(step)
    finally:
        cap.sock.close()
    stem = f"{endpoint.name}/{name}-{version}"
    (HERE / endpoint.name).mkdir(exist_ok=True)
    (HERE / f"{stem}.server.bin").write_bytes(bytes(cap.server))
    (HERE / f"{stem}.client.bin").write_bytes(bytes(cap.client))
    return {
        "broker": endpoint.name,
        "server": endpoint.server,
        "session": name,
        "version": version,
        "vhost": endpoint.vhost,
        "names": {"queue": names.queue, "topic": names.topic},
        "steps": cap.steps,
        "frames": cap.frames,
        "closed": cap.closed,
        "notes": session.notes,
    }


def dump_index(index: dict[str, Any]) -> str:
    """index.json: one capture per line, so that a re-capture diffs readably."""
    lines = [f' "captured": {json.dumps(index["captured"])},', ' "captures": {']
    entries = list(index["captures"].items())
    for n, (key, entry) in enumerate(entries):
        comma = "," if n < len(entries) - 1 else ""
        lines.append(f"  {json.dumps(key)}: {json.dumps(entry, ensure_ascii=False)}{comma}")
    return "{\n" + "\n".join(lines) + "\n }\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", action="append", choices=brokers.REAL_BROKERS)
    parser.add_argument("sessions", nargs="*", help=f"default: all of {', '.join(SESSIONS)}")
    args = parser.parse_args()
    unknown = set(args.sessions) - set(SESSIONS)
    if unknown:
        parser.error(f"unknown sessions: {', '.join(sorted(unknown))}")
    index: dict[str, Any] = json.loads(INDEX.read_text()) if INDEX.exists() else {}
    captures = index.setdefault("captures", {})
    for broker in args.broker or brokers.REAL_BROKERS:
        found = brokers._probe(broker)
        if not isinstance(found, brokers.Endpoint):
            print(found, file=sys.stderr)
            return 1
        for name in args.sessions or SESSIONS:
            session = SESSIONS[name]
            if broker not in session.brokers:
                continue
            for version in session.versions:
                entry = capture(name, session, found, version)
                captures[f"{broker}/{name}-{version}"] = entry
                print(
                    f"{broker}/{name}-{version}: {' '.join(entry['frames'])}"
                    f"{' (closed)' if entry['closed'] else ''}"
                )
    index["captured"] = datetime.date.today().isoformat()
    index["captures"] = dict(sorted(captures.items()))
    INDEX.write_text(dump_index(index))
    return 0


if __name__ == "__main__":
    sys.exit(main())
