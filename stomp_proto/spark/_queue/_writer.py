"""The write side without Spark: column mapping, SEND frames, one transaction per partition.

Each partition of a write is sent inside one STOMP transaction: BEGIN, the
SENDs, then COMMIT with a receipt.  The partition reports success only once
that receipt has arrived, so the broker has taken every message of it; if
the task fails anywhere before, the transaction is never committed and the
broker discards its messages (a retried task sends them afresh, without
duplicates).  A lost connection discards the transaction too: the frames
sent so far (up to :data:`RESEND_LIMIT` bytes) are sent again in it over a
new connection, with the bounded backoff of :mod:`.._retry`.

The SEND frames are made by the library's :class:`~stomp_proto.FrameEncoder`
for the negotiated version.  For rows without headers of their own, the
encoded head (destination, transaction, static headers) is made once per
destination and reused: the bytes are the same as the encoder's, several
times faster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._encoder import FrameEncoder
from ..._events import Abort, Begin, Commit, Disconnect
from ..._frame import Frame
from .._columns import (
    BINARY,
    HEADER_MAP,
    RESERVED_HEADERS,
    STRING,
    TEXT_CONTENT_TYPE,
    body_column,
)
from .._options import ConnectionSettings, WriterSettings
from .._retry import Retry
from ._link import Producer

__all__ = [
    "ColumnPlan",
    "PartitionWriter",
    "SendEncoder",
    "plan_columns",
]

log = logging.getLogger("stomp_proto.spark")

#: Bytes of a transaction's frames kept to send again after a lost connection; past
#: this a lost connection fails the write (its task), as before there were retries.
RESEND_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True)
class ColumnPlan:
    """Which DataFrame columns the sink reads."""

    body: str
    #: The column naming each row's destination, or None: the option's for every row.
    destination: str | None
    headers: str | None
    default_destination: str | None


def plan_columns(fields: Sequence[tuple[str, str]], settings: WriterSettings) -> ColumnPlan:
    """Check the DataFrame's ``(column, type)`` pairs against the mapping; ValueError if unusable.

    Types are Spark's simple strings (``string``, ``binary``, ``map<string,string>``, ...).
    """
    kinds = dict(fields)
    names = ", ".join(name for name, _ in fields) or "none"
    body = body_column(kinds, settings.body_column)
    if kinds.get(body) not in (STRING, BINARY):
        found = f"it is {kinds[body]}" if body in kinds else f"the columns are: {names}"
        raise ValueError(
            f"the STOMP sink needs a {body!r} column (or Kafka's 'value') of type binary or string "
            f"(option 'bodyColumn'); {found}"
        )
    destination: str | None = settings.destination_column
    if destination not in kinds:
        destination = None
        if settings.destination is None:
            raise ValueError(
                "the STOMP sink needs a destination: set the 'destination' option or give "
                f"the DataFrame a {settings.destination_column!r} string column"
            )
    elif kinds[destination] != STRING:
        raise ValueError(f"the destination column {destination!r} must be a string column")
    headers: str | None = settings.headers_column
    if headers not in kinds:
        headers = None
    elif kinds[headers] != HEADER_MAP:
        raise ValueError(
            f"the headers column {headers!r} must be map<string,string>, not {kinds[headers]}"
        )
    return ColumnPlan(
        body=body,
        destination=destination,
        headers=headers,
        default_destination=settings.destination,
    )


class SendEncoder:
    """Rows to the bytes of SEND frames in one transaction, for one protocol version."""

    def __init__(
        self,
        encoder: FrameEncoder,
        transaction: str,
        default_destination: str | None,
        static_headers: Mapping[str, str],
    ) -> None:
        self._encoder = encoder
        self._transaction = transaction
        self._default = default_destination
        self._static = [(k, v) for k, v in static_headers.items() if k not in RESERVED_HEADERS]
        self._static_names = {k for k, _ in self._static}
        self._heads: dict[tuple[str, bool], bytes] = {}

    def _head(self, destination: str, text: bool) -> bytes:
        """The encoded frame head up to the content-length line, for rows without headers."""
        key = (destination, text)
        head = self._heads.get(key)
        if head is None:
            headers = [("destination", destination), ("transaction", self._transaction)]
            headers += self._static
            if text and "content-type" not in self._static_names:
                headers.append(("content-type", TEXT_CONTENT_TYPE))
            encoded = self._encoder.encode(Frame("SEND", tuple(headers)), content_length=False)
            assert encoded.endswith(b"\n\n\0")
            head = self._heads[key] = encoded[:-2]
        return head

    def _frame(self, destination: str, body: bytes, text: bool, row_headers: Any) -> bytes:
        """One SEND with a row's own headers, through the encoder."""
        pairs = row_headers.items() if isinstance(row_headers, Mapping) else row_headers
        own = [(k, v) for k, v in pairs if v is not None and k not in RESERVED_HEADERS]
        names = {k for k, _ in own}
        headers = [("destination", destination), ("transaction", self._transaction)]
        headers += [(k, v) for k, v in self._static if k not in names]
        headers += own
        if text and "content-type" not in names and "content-type" not in self._static_names:
            headers.append(("content-type", TEXT_CONTENT_TYPE))
        return self._encoder.encode(Frame("SEND", tuple(headers), body))

    def encode(
        self,
        bodies: Sequence[bytes | str | None],
        destinations: Sequence[str | None] | None,
        headers: Sequence[Any] | None,
        first_row: int = 0,
    ) -> bytes:
        """The SEND frames of rows given column by column (``None`` for an absent column)."""
        parts: list[bytes] = []
        add = parts.append
        default = self._default
        for i, body in enumerate(bodies):
            text = isinstance(body, str)
            data = body.encode("utf-8") if isinstance(body, str) else (body or b"")
            destination = destinations[i] if destinations is not None else None
            if destination is None:
                destination = default
                if destination is None:
                    raise ValueError(
                        f"row {first_row + i} has no destination (null in the destination "
                        "column, and no 'destination' option)"
                    )
            row_headers = headers[i] if headers is not None else None
            if row_headers:
                add(self._frame(destination, data, text, row_headers))
            elif data:
                add(self._head(destination, text))
                add(b"content-length:%d\n\n" % len(data))
                add(data)
                add(b"\0")
            else:
                add(self._head(destination, text))
                add(b"\n\0")
        return b"".join(parts)


class PartitionWriter:
    """Sends one partition's rows in one transaction; see the module docstring.

    Picklable: it connects in :meth:`write_batches` / :meth:`write_rows`.
    """

    def __init__(
        self, connection: ConnectionSettings, settings: WriterSettings, plan: ColumnPlan
    ) -> None:
        self.connection = connection
        self.settings = settings
        self.plan = plan

    def write_batches(self, batches: Iterable[Any]) -> tuple[int, str | None]:
        """Send Arrow record batches; returns (rows sent, transaction id) once committed."""
        plan = self.plan

        def columns(batch: Any, name: str | None) -> list[Any] | None:
            if name is None:
                return None
            return batch.column(batch.schema.get_field_index(name)).to_pylist()  # type: ignore[no-any-return]

        chunks = (
            (columns(b, plan.body), columns(b, plan.destination), columns(b, plan.headers))
            for b in batches
            if b.num_rows
        )
        return self._send(chunks)  # type: ignore[arg-type]

    def write_rows(self, rows: Iterable[Any], chunk: int = 10_000) -> tuple[int, str | None]:
        """Send Spark ``Row`` objects (the row-based writer API of Spark 4.0)."""
        plan = self.plan

        def chunks() -> Iterable[tuple[list[Any], list[Any] | None, list[Any] | None]]:
            block: list[Any] = []
            for row in rows:
                block.append(row)
                if len(block) >= chunk:
                    yield self._columns(block, plan)
                    block = []
            if block:
                yield self._columns(block, plan)

        return self._send(chunks())

    @staticmethod
    def _columns(
        rows: list[Any], plan: ColumnPlan
    ) -> tuple[list[Any], list[Any] | None, list[Any] | None]:
        def column(name: str | None) -> list[Any] | None:
            return None if name is None else [row[name] for row in rows]

        body = column(plan.body)
        assert body is not None
        return body, column(plan.destination), column(plan.headers)

    def _send(
        self, chunks: Iterable[tuple[list[Any], list[Any] | None, list[Any] | None]]
    ) -> tuple[int, str | None]:
        iterator = iter(chunks)
        first = next(iterator, None)
        if first is None:
            return 0, None  # an empty partition needs no connection
        where = self.plan.default_destination or "the destination column's destinations"
        transaction = Transaction(self.connection, f"writing to {where}")
        sent = 0
        try:
            encoder = SendEncoder(
                FrameEncoder(transaction.version),
                transaction.id,
                self.plan.default_destination,
                self.settings.send_headers,
            )
            chunk: tuple[list[Any], list[Any] | None, list[Any] | None] | None = first
            while chunk is not None:
                bodies, destinations, headers = chunk
                transaction.write(encoder.encode(bodies, destinations, headers, sent))
                sent += len(bodies)
                chunk = next(iterator, None)
            transaction.commit()
        except BaseException:
            transaction.abort()
            raise
        transaction.close()
        return sent, transaction.id


class Transaction:
    """One partition's STOMP transaction, carried over to a new connection if one is lost.

    The broker discards an uncommitted transaction with its connection, so the
    frames written so far are kept (up to :data:`RESEND_LIMIT` bytes) and
    written again, after a new BEGIN, over a new connection of the same STOMP
    version, as :class:`~.._retry.Retry` allows.
    """

    def __init__(self, connection: ConnectionSettings, what: str) -> None:
        self.id = f"spark-{uuid.uuid4().hex}"
        self._retry = Retry(connection, what, source="stomp")
        self._connection = connection
        self._kept: list[bytes] | None = []
        self._size = 0
        self._producer = self._retry.call(self._begin)
        #: The negotiated version, which the frames are encoded for.
        self.version = self._producer.connection.version or "1.2"
        # A new connection must speak it too: the kept frames are of this version.
        self._connection = dataclasses.replace(connection, versions=(self.version,))

    def _begin(self) -> Producer:
        producer = Producer(self._connection)
        try:
            producer.send(Begin(self.id))
            for data in self._kept or ():
                producer.write(data)
        except BaseException:
            producer.close()
            raise
        return producer

    def write(self, data: bytes) -> None:
        """Write SEND frames of the transaction (``data``, of :attr:`version`)."""
        if self._kept is not None:
            self._size += len(data)
            if self._size <= RESEND_LIMIT:
                self._kept.append(data)
            else:
                log.info(
                    "stomp: transaction %s is over %d bytes: a lost connection now fails it",
                    self.id, RESEND_LIMIT,
                )  # fmt: skip
                self._kept = None
        try:
            self._producer.write(data)
        except Exception as exc:
            self._resume(exc)  # the new connection has written ``data`` too
        else:
            self._retry.succeeded()  # a later outage gets the whole retryTimeout again

    def commit(self) -> None:
        """COMMIT, and wait for the broker's receipt."""
        receipt = f"{self.id}-commit"
        while True:
            try:
                self._producer.send(Commit(self.id, receipt=receipt))
            except Exception as exc:
                self._resume(exc)
                continue
            try:
                self._producer.wait_for_receipt(receipt)
                return
            except Exception as exc:
                if self._kept is not None:
                    log.warning(
                        "stomp: the receipt for COMMIT %s was lost (%s): it is sent again, "
                        "so if the broker had committed it, its messages are there twice",
                        self.id, exc,
                    )  # fmt: skip
                self._resume(exc)

    def _resume(self, exc: Exception) -> None:
        """After ``exc`` on the connection: the transaction again on a new one, or raise."""
        self._producer.close()
        if self._kept is None:
            raise exc
        self._retry.failed(exc)
        self._producer = self._retry.call(self._begin)

    def abort(self) -> None:
        # Without a COMMIT the broker drops the transaction when the connection
        # ends; the ABORT only says so sooner.
        with contextlib.suppress(Exception):
            self._producer.send(Abort(self.id))
        self._producer.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._producer.request(Disconnect(receipt=f"{self.id}-bye"))
        self._producer.close()
