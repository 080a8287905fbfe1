"""Decoding recorded STOMP byte streams (``stomp-capture``) without Spark.

A capture file holds the bytes of one direction of one connection, as
recorded: what a client sent, or what a broker sent.  Each file is decoded by
one :class:`~stomp_proto.FrameDecoder` into one row per frame; files are
independent, so Spark decodes them in parallel (one partition per file).

Wire rules: ``version=auto`` (the default) starts with STOMP 1.2's rules and
switches when the stream shows the version: a CONNECTED frame's ``version``
header, or for a client's stream the highest version its CONNECT offers
(the server's choice is not in that stream).  CONNECT and CONNECTED are never
escaped, so they read the same under any rules.

Bad bytes end the file's decoding: the decoder cannot find the next frame
boundary reliably after an error.  With ``onError=row`` (the default) the
file yields one last row carrying the error and the byte offset where the
bad frame starts; with ``onError=fail`` the read fails with that message.  A
capture that stops mid-frame - a recording cut short - is such an error
(``truncated``).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from typing import Any

from .._decoder import FrameDecoder
from .._errors import ProtocolError
from .._events import HeartBeat
from .._frame import VERSIONS, Frame, Version
from ._options import CaptureSettings
from ._schema import CAPTURE_ARROW_SCHEMA

__all__ = ["CaptureError", "capture_files", "decode_file", "decode_rows"]

#: Bytes read from a capture file at a time.
CHUNK = 1024 * 1024
#: Rows per record batch.
BATCH_ROWS = 10_000
#: The ``command`` of a heart-beat row (with includeHeartbeats=true).
HEARTBEAT_COMMAND = "HEARTBEAT"


class CaptureError(ValueError):
    """Bad data in a capture file, with ``onError=fail``."""


def capture_files(settings: CaptureSettings) -> list[str]:
    """The files a path names: itself, a directory's files (sorted), or a glob's matches."""
    path = settings.path
    if path.startswith("file://"):
        path = path[len("file://") :]
    if os.path.isfile(path):
        return [path]
    if os.path.isdir(path):
        if settings.recursive:
            found = [
                os.path.join(root, name)
                for root, _, names in os.walk(path)
                for name in names
                if not name.startswith((".", "_"))
            ]
        else:
            found = [
                os.path.join(path, name)
                for name in os.listdir(path)
                if not name.startswith((".", "_")) and os.path.isfile(os.path.join(path, name))
            ]
        return sorted(found)
    matches = sorted(p for p in glob.glob(path, recursive=settings.recursive) if os.path.isfile(p))
    if not matches:
        raise FileNotFoundError(f"stomp-capture: no file at {settings.path!r}")
    return matches


def _version_of(frame: Frame) -> Version | None:
    """The version a handshake frame tells, if it is one."""
    if frame.command == "CONNECTED":
        value = (frame.get("version") or "1.0").strip()
        return next((v for v in VERSIONS if v == value), None)
    if frame.command in ("CONNECT", "STOMP"):
        offered = frame.get("accept-version")
        if offered is None:
            return "1.0"
        known = [v for v in VERSIONS if v in {o.strip() for o in offered.split(",")}]
        return known[-1] if known else None
    return None


def decode_rows(path: str, settings: CaptureSettings) -> Iterator[tuple[Any, ...]]:
    """The rows of one capture file, as tuples in the capture schema's column order."""
    auto = settings.version == "auto"
    initial: Version = "1.2" if settings.version == "auto" else settings.version
    decoder = FrameDecoder(initial, strict=settings.strict)
    index = 0
    fed = 0
    with open(path, "rb") as stream:
        at_end = False
        while not at_end:
            chunk = stream.read(CHUNK)
            at_end = not chunk
            try:
                decoder.receive_data(chunk if chunk else None)
                fed += len(chunk)
                while True:
                    offset = fed - decoder.buffered
                    item = decoder.next_frame()
                    if item is None:
                        break
                    if isinstance(item, HeartBeat):
                        if settings.heartbeats:
                            yield (path, index, offset, HEARTBEAT_COMMAND, None, None, None)
                            index += 1
                        continue
                    if auto:
                        version = _version_of(item)
                        if version is not None:
                            decoder.version = version
                    yield (path, index, offset, item.command, item.header_map(), item.body, None)
                    index += 1
            except ProtocolError as exc:
                offset = fed - decoder.buffered
                message = f"{exc.kind.name.lower()}: {exc.message}"
                if settings.on_error == "fail":
                    raise CaptureError(
                        f"stomp-capture: bad STOMP data in {path} at byte {offset}: {message}"
                    ) from exc
                yield (path, index, offset, None, None, None, message)
                return


def decode_file(path: str, settings: CaptureSettings) -> Iterator[Any]:
    """The rows of one capture file as Arrow record batches of the capture schema."""
    import pyarrow as pa  # type: ignore[import-untyped, import-not-found, unused-ignore]

    columns: list[list[Any]] = [[] for _ in CAPTURE_ARROW_SCHEMA.names]
    for row in decode_rows(path, settings):
        for column, value in zip(columns, row, strict=True):
            column.append(value)
        if len(columns[0]) >= BATCH_ROWS:
            yield _batch(pa, columns)
            columns = [[] for _ in CAPTURE_ARROW_SCHEMA.names]
    if columns[0]:
        yield _batch(pa, columns)


def _batch(pa: Any, columns: list[list[Any]]) -> Any:
    headers = [None if h is None else list(h.items()) for h in columns[4]]
    values = [*columns[:4], headers, *columns[5:]]
    arrays = [
        pa.array(column, field.type)
        for column, field in zip(values, CAPTURE_ARROW_SCHEMA, strict=True)
    ]
    return pa.record_batch(arrays, schema=CAPTURE_ARROW_SCHEMA)
