"""Size limits that bound what a peer can make the decoder buffer."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Upper bounds on incoming frames (1.2 §Size Limits).

    Each limit is checked as soon as it is exceeded - when a too-large
    ``content-length`` is declared, or when a line grows past its bound before
    its end-of-line arrives - never after buffering everything, and with the
    same outcome whether the bytes arrive whole or one at a time.  The decoder
    therefore never holds much more than ``max_frame_size`` bytes.

    The defaults follow what brokers accept in practice: RabbitMQ's default
    frame limit is 4 MiB and ActiveMQ's 100 MiB; header lines of tens of KiB
    carry tokens.
    """

    #: Longest command or header line, in bytes, not counting its end-of-line.
    max_line_length: int = 64 * 1024
    #: Most header lines in one frame.
    max_headers: int = 1000
    #: Longest head (command line, header lines and their end-of-lines), in bytes.
    max_head_size: int = 1024 * 1024
    #: Largest body, in bytes.
    max_body_size: int = 64 * 1024 * 1024
    #: Largest frame (head and body), in bytes.
    max_frame_size: int = 65 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"Limits.{name} must be an int (bytes or a count), not {value!r}")
            if value < 1:
                raise ValueError(f"Limits.{name} must be a positive int, not {value!r}")


DEFAULT_LIMITS = Limits()
