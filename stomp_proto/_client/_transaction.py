"""What a transaction object of ``client.begin()`` is, whatever the I/O.

The asyncio/trio and threads clients each have a class with the same methods
(``send``, ``ack``, ``nack``, ``commit``, ``abort``), awaitable or blocking;
this is their shared part: the id, and the rule that a transaction is ended
once, after which nothing more goes into it.
"""

from __future__ import annotations

from .._errors import LocalProtocolError
from .._protocol_errors import ErrorKind

__all__ = ["TransactionBase"]


class TransactionBase:
    """One transaction begun with ``client.begin()``: its id, and whether it has ended."""

    __slots__ = ("_ended", "_id")

    def __init__(self, transaction: str) -> None:
        self._id = transaction
        #: How it ended ("committed", "aborted"), or None while it is open.
        self._ended: str | None = None

    @property
    def id(self) -> str:
        """The transaction's id (the ``transaction`` header of its frames)."""
        return self._id

    @property
    def open(self) -> bool:
        """Whether it may still take frames: neither committed nor aborted."""
        return self._ended is None

    def _use(self, how: str | None = None) -> str:
        """Its id, for one more frame (``how``: the frame ends it, as "committed" or
        "aborted"); a LocalProtocolError once it has ended."""
        if self._ended is not None:
            raise LocalProtocolError(
                ErrorKind.BAD_STATE,
                f"transaction {self._id!r} was {self._ended} already: begin() another",
            )
        if how is not None:
            self._ended = how
        return self._id

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._id} {self._ended or 'open'}>"
