"""Codec benchmarks: stomp_proto's FrameDecoder/FrameEncoder against stompest, stomp.py, stompman.

    python benchmarks/codec.py            # full run (about 2 minutes)
    python benchmarks/codec.py --quick    # smoke run with small workloads (a few seconds)
    python benchmarks/codec.py --json results.json --svg chart.svg
    python benchmarks/codec.py --accelerated  # also time the accelerated build, side by side
    python benchmarks/codec.py --cpu-time     # CPU time per run, not wall time (loaded machines)
    python benchmarks/codec.py --against ../other-checkout   # this tree against another one

Every decoder is checked before it is timed: it must return the expected number of frames,
and stomp_proto must return exactly the expected frames.  Targets are reported, never
enforced; the exit status is 0 unless stomp_proto itself decodes or encodes wrongly (2).
See benchmarks/README.rst for what each row measures.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import gc
import importlib.metadata
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import chart
import stompest.protocol  # type: ignore[import-untyped]
from _peers import (
    PEER_DECODERS,
    PEER_ENCODERS,
    Decoded,
    DecoderAdapter,
    EncoderAdapter,
    Headers,
    first_wins,
)

ROOT = Path(__file__).resolve().parent.parent
# The source tree next to this directory is measured, even where another copy is
# installed; the --accelerated and --against workers point this at another copy instead,
# and name its rows.
_WORKER_PATH = os.environ.get("STOMP_PROTO_BENCH_PATH")
sys.path.insert(0, _WORKER_PATH or str(ROOT))
try:
    import stomp_proto
except ImportError:
    stomp_proto = None  # type: ignore[assignment]
if stomp_proto is not None and not all(
    hasattr(stomp_proto, name) for name in ("Frame", "FrameDecoder", "FrameEncoder", "Limits")
):
    stomp_proto = None  # type: ignore[assignment]  # the package is still being written

KiB = 1024
MiB = 1024 * KiB
READ_SIZES = (1, 1460, 64 * KiB)
OURS = "stomp_proto"
ACCELERATED = "stomp_proto[accelerated]"
#: The rows of another checkout, timed by --against.
BASELINE = "stomp_proto[baseline]"
# The --accelerated worker times the native fast path or nothing: never the pure code.
if (
    os.environ.get("STOMP_PROTO_BENCH_NAME") == ACCELERATED
    and getattr(stomp_proto, "BUILD", None) != "accelerated"
):
    sys.exit(f"{ACCELERATED} worker: stomp_proto.BUILD is {getattr(stomp_proto, 'BUILD', None)!r}")
#: Every build of ours; ratios and targets are computed for each.
BUILDS = (OURS, ACCELERATED, BASELINE)
#: The name of the rows this process times for stomp_proto.
_OUR_NAME = os.environ.get("STOMP_PROTO_BENCH_NAME", OURS)
#: --against flags a row of this tree slower than the other checkout's by more than this.
SLOWER = 0.05
FLOOR = "scan floor"


# --------------------------------------------------------------------------- wire reference


def _escape(text: str) -> str:
    """STOMP 1.2 header escaping, written independently of the code under test."""
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n").replace(":", "\\c")


def wire(command: str, headers: Headers, body: bytes) -> bytes:
    """One 1.2 frame on the wire, exactly as given (headers already include content-length)."""
    head = "".join(f"{_escape(k)}:{_escape(v)}\n" for k, v in headers)
    return f"{command}\n{head}\n".encode() + body + b"\x00"


# --------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Expected:
    command: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


@dataclass
class Workload:
    key: str
    title: str
    frames: list[Expected]
    stream: bytes = field(init=False, repr=False)
    ends: list[int] = field(init=False, repr=False)  # stream offset just past each frame

    def __post_init__(self) -> None:
        parts = [wire(f.command, f.headers, f.body) for f in self.frames]
        self.stream = b"".join(parts)
        self.ends = []
        total = 0
        for part in parts:
            total += len(part)
            self.ends.append(total)

    def prefix(self, max_frames: int, max_bytes: int) -> Workload | None:
        """The first frames that fit both caps (used for 1-byte reads), or None if none fit."""
        count = sum(1 for end in self.ends[:max_frames] if end <= max_bytes)
        return Workload(self.key, self.title, self.frames[:count]) if count else None


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


_WORDS = (
    b"order shipped to warehouse pallet invoice customer account priority express "
    b"batch ledger route depot courier parcel manifest"
).split()


def _text(rng: random.Random, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        out += rng.choice(_WORDS) + b" "
    return bytes(out[:size])


def _message(i: int, extra: Headers, body: bytes, content_length: bool = True) -> Expected:
    headers: list[tuple[str, str]] = [
        ("destination", "/queue/bench.orders"),
        ("message-id", f"ID:broker-7f3a-41522-1700000000000-1:1:1:1:{i}"),  # raw ':' -> \c
        ("subscription", f"sub-{i % 4}"),
        *extra,
    ]
    if content_length:
        headers.append(("content-length", str(len(body))))
    return Expected("MESSAGE", tuple(headers), body)


def small_frames(count: int, rng: random.Random) -> list[Expected]:
    """MESSAGE frames with 8 headers (3 of them escaped) and a 100-byte text body."""
    return [
        _message(
            i,
            [
                ("ack", f"ID:broker-7f3a-41522-1700000000000-1:{i}"),
                ("content-type", "text/plain;charset=utf-8"),
                ("x-path", "C:\\data\\in"),  # backslashes and a colon
                ("x-note", "line one\nline two"),  # a newline
            ],
            _text(rng, 100),
        )
        for i in range(count)
    ]


def binary_frames(count: int, size: int, rng: random.Random) -> list[Expected]:
    """MESSAGE frames whose random binary body (with NULs) is framed by content-length."""
    frames = []
    for i in range(count):
        body = bytearray(rng.randbytes(size))
        body[size // 2] = 0  # at least one NUL, whatever the seed
        frames.append(_message(i, [("content-type", "application/octet-stream")], bytes(body)))
    return frames


def text_frames(count: int, size: int, rng: random.Random) -> list[Expected]:
    """MESSAGE frames without content-length: the body ends at the first NUL."""
    extra = [("content-type", "text/plain;charset=utf-8")]
    return [_message(i, extra, _text(rng, size), content_length=False) for i in range(count)]


def make_workloads(quick: bool) -> list[Workload]:
    rng = random.Random(20240611)
    scale = 10 if quick else 1
    return [
        Workload("small", "small: 8 headers, 100 B body", small_frames(2000 // scale, rng)),
        Workload("4k", "4 KiB binary, content-length", binary_frames(256 // scale, 4 * KiB, rng)),
        # 16 frames, so that a timed run lasts milliseconds: with 2 it lasted
        # 0.1-0.5 ms, and the ratio to the floor moved 2x between runs.
        Workload("1m", "1 MiB binary, content-length", binary_frames(1 if quick else 16, MiB, rng)),
        Workload("nocl", "1 KiB text, no content-length", text_frames(1000 // scale, KiB, rng)),
    ]


# --------------------------------------------------------------------------- our adapters


class StompProtoDecoder(DecoderAdapter):
    """``FrameDecoder('1.2', strict=True)``: ``receive_data(chunk)``, then ``next_frame()``."""

    name = _OUR_NAME

    def decode(self, chunks: Sequence[bytes]) -> list[Any]:
        decoder = stomp_proto.FrameDecoder("1.2", strict=True)
        receive_data = decoder.receive_data
        next_frame = decoder.next_frame
        frame_cls = stomp_proto.Frame
        out: list[Any] = []
        for chunk in chunks:
            receive_data(chunk)
            while (frame := next_frame()) is not None:
                if type(frame) is frame_cls:
                    out.append(frame)
        receive_data(None)
        if next_frame() is not None:
            raise AssertionError("frame after end of stream")
        return out

    def normalize(self, frame: Any) -> Decoded:
        return Decoded(frame.command, frame.header_map(), frame.body)


class ScanFloor(DecoderAdapter):
    """The least a chunk-fed content-length decoder must pay.

    Per read: one list append.  While a head is incomplete: join what is pending and
    ``find`` the blank line, then the ``content-length`` line.  Once the body is complete:
    one ``join`` of memoryview slices, so each body byte is copied exactly once, and a check
    that a NUL follows.  Nothing else is parsed, decoded or validated.  Used for the 1 MiB
    workload, whose cost is all body handling.
    """

    name = FLOOR
    checks_headers: ClassVar[bool] = False

    def decode(self, chunks: Sequence[bytes]) -> list[Any]:
        out: list[Any] = []
        pending: list[bytes] = []
        skip = 0  # consumed bytes at the start of pending[0]
        have = 0  # bytes in pending, skipped ones included; offsets below count from there
        start = end = -1  # body bounds
        for chunk in chunks:
            pending.append(chunk)
            have += len(chunk)
            while True:
                if end < 0:
                    if len(pending) > 1:
                        pending = [b"".join([memoryview(pending[0])[skip:], *pending[1:]])]
                        have -= skip
                        skip = 0
                    data = pending[0]
                    head_end = data.find(b"\n\n", skip)
                    if head_end < 0:
                        break
                    i = data.find(b"\ncontent-length:", skip, head_end) + 16
                    start = head_end + 2
                    end = start + int(data[i : data.find(b"\n", i)])
                if have <= end:
                    break
                # The NUL arrived with the last read: before it, have <= end held.
                last = pending[-1]
                nul = end - (have - len(last))
                if last[nul] != 0:
                    raise AssertionError("missing NUL")
                if len(pending) == 1:
                    out.append(last[start:end])
                else:
                    first, *middle = pending[:-1]
                    parts: list[bytes | memoryview] = [memoryview(first)[start:], *middle]
                    parts.append(memoryview(last)[:nul])
                    out.append(b"".join(parts))
                pending = [last]
                skip = nul + 1
                have = len(last)
                end = -1
        return out

    def normalize(self, frame: Any) -> Decoded:
        return Decoded("", {}, frame)


class StompProtoEncoder(EncoderAdapter):
    """``FrameEncoder('1.2').encode(Frame('SEND', headers, body))`` (adds content-length)."""

    name = _OUR_NAME
    escapes_names = True

    def prepare(self, headers: Headers, body: bytes) -> Callable[[], bytes]:
        encode_frame = stomp_proto.FrameEncoder("1.2").encode
        frame_cls = stomp_proto.Frame
        pairs = tuple(headers)

        def encode() -> bytes:
            return encode_frame(frame_cls("SEND", pairs, body))

        return encode


# --------------------------------------------------------------------------- measurement

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def pin_malloc() -> bool:
    """Make glibc reuse freed large blocks, as a long-running process ends up doing.

    By default glibc serves large allocations with fresh mmap()s until its adaptive
    threshold has risen, and trims the heap top; a run then pays page faults for every
    megabyte it touches, or not, depending on what earlier rows allocated.  That swings
    the 1 MiB rows by 5-10x.  Pinning both thresholds high makes every codec run in the
    warm-heap regime.  Returns False where this is not glibc.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 * MiB)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))


@dataclass
class Settings:
    quick: bool
    malloc_pinned: bool
    repeats: int
    budget: float  # seconds of timed runs per row, after the first timed run
    one_byte_frames: int
    one_byte_bytes: int
    encode_frames: int
    big_body: int
    # "wall" (perf_counter) or "cpu": this process's CPU time (process_time), which a
    # loaded machine disturbs less, since the time other processes run is not counted.
    clock: str = "wall"


def settings_for(
    quick: bool, repeats: int | None, malloc_pinned: bool, clock: str = "wall"
) -> Settings:
    if quick:
        return Settings(True, malloc_pinned, repeats or 2, 0.2, 50, 8 * KiB, 2000, 8 * MiB, clock)
    return Settings(False, malloc_pinned, repeats or 5, 1.5, 200, 64 * KiB, 10_000, 64 * MiB, clock)


@dataclass
class Row:
    group: str  # "decode" or "encode"
    workload: str
    read_size: int | None
    codec: str
    frames: int
    nbytes: int
    best_s: float | None = None
    runs: int = 0
    ok: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def frames_per_s(self) -> float | None:
        return self.frames / self.best_s if self.best_s else None

    @property
    def mb_per_s(self) -> float | None:
        return self.nbytes / self.best_s / 1e6 if self.best_s else None


def best_time(run: Callable[[], int], expected: int, settings: Settings) -> tuple[float, int]:
    """Best time (``settings.clock``) of up to ``settings.repeats`` runs (fewer when over
    the time budget, in wall time)."""
    clock = time.process_time if settings.clock == "cpu" else time.perf_counter
    gc.collect()
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < settings.repeats:
        t0 = clock()
        count = run()
        times.append(clock() - t0)
        if count != expected:
            raise AssertionError(f"{count} frames instead of {expected}")
        if time.perf_counter() - started > settings.budget:
            break
    return min(times), len(times)


def check_decoded(
    adapter: DecoderAdapter, frames: list[Any], expected: list[Expected]
) -> list[str]:
    """Differences between what ``adapter`` decoded and the expected frames (empty if none)."""
    if len(frames) != len(expected):
        return [f"{len(frames)} frames instead of {len(expected)}"]
    problems: list[str] = []
    checks_headers = getattr(adapter, "checks_headers", True)
    for index, (frame, want) in enumerate(zip(frames, expected, strict=True)):
        got = adapter.normalize(frame)
        if got.body != want.body:
            problems.append(f"frame {index}: body differs ({len(got.body)} vs {len(want.body)} B)")
        if checks_headers:
            if got.command != want.command:
                problems.append(f"frame {index}: command {got.command!r}")
            want_headers = first_wins(want.headers)
            for name in sorted(set(want_headers) | set(got.headers)):
                if got.headers.get(name) != want_headers.get(name):
                    problems.append(
                        f"frame {index}: header {name!r} = {got.headers.get(name)!r},"
                        f" expected {want_headers.get(name)!r}"
                    )
        ours = adapter.name in BUILDS
        if ours and (frame.command, frame.headers) != (want.command, want.headers):
            problems.append(f"frame {index}: header list differs: {frame.headers!r}")
        if len(problems) >= 3:
            break
    return problems


def decoders_for(workload: Workload, ours_only: bool = False) -> list[DecoderAdapter]:
    ours: list[DecoderAdapter] = [StompProtoDecoder()] if stomp_proto else []
    if ours_only:
        return ours
    floor: list[DecoderAdapter] = [ScanFloor()] if workload.key == "1m" else []
    return [*ours, *PEER_DECODERS, *floor]


def decode_row(
    adapter: DecoderAdapter, workload: Workload, read_size: int, settings: Settings
) -> Row:
    """Check, then time, one decoder on one workload at one read size."""
    chunks = chunked(workload.stream, read_size)
    frames = len(workload.frames)
    row = Row("decode", workload.key, read_size, adapter.name, frames, len(workload.stream))
    try:
        # The checked run doubles as the warm-up.
        row.problems = check_decoded(adapter, adapter.decode(chunks), workload.frames)
        row.best_s, row.runs = best_time(lambda: len(adapter.decode(chunks)), frames, settings)
    except Exception as exc:  # a peer that chokes is reported, not fatal
        row.problems.append(f"{type(exc).__name__}: {exc}")
        row.best_s = None
    row.ok = not row.problems
    return row


def bench_decode(
    workloads: list[Workload],
    settings: Settings,
    log: Callable[[str], None],
    ours_only: bool = False,
) -> list[Row]:
    rows: list[Row] = []
    for full in workloads:
        for read_size in READ_SIZES:
            workload = (
                full.prefix(settings.one_byte_frames, settings.one_byte_bytes)
                if read_size == 1
                else full
            )
            if workload is None:
                continue
            for adapter in decoders_for(workload, ours_only):
                log(f"decode {workload.key:5} {_size(read_size):>7}  {adapter.name}")
                rows.append(decode_row(adapter, workload, read_size, settings))
    return rows


ENCODE_HEADERS: tuple[tuple[str, str], ...] = (
    ("destination", "/queue/bench.orders"),
    ("content-type", "text/plain;charset=utf-8"),
    ("persistent", "true"),
    ("priority", "4"),
    ("correlation-id", "ID:client-1:2:3"),  # colons
    ("reply-to", "/temp-queue/replies"),
    ("x-path", "C:\\data\\out"),  # backslashes and a colon
    ("x-note", "line one\nline two"),  # a newline
)
ENCODE_BODY = b"0123456789abcdef" * 6 + b"wxyz"  # 100 bytes


def encoders(ours_only: bool = False) -> list[EncoderAdapter]:
    return [*([StompProtoEncoder()] if stomp_proto else []), *([] if ours_only else PEER_ENCODERS)]


def check_encoded(data: bytes) -> list[str]:
    """Decode with stompest's strict 1.2 parser (the referee) and compare with the input."""
    parser = stompest.protocol.StompParser("1.2")
    parser.add(data)
    frame = parser.get()
    want = {**dict(ENCODE_HEADERS), "content-length": str(len(ENCODE_BODY))}
    got = first_wins(frame.rawHeaders)
    problems = [f"header {k!r} = {got.get(k)!r}" for k in sorted(want) if got.get(k) != want[k]]
    problems += [f"extra header {k!r}" for k in sorted(set(got) - set(want))]
    if (frame.command, frame.body) != ("SEND", ENCODE_BODY) or parser.canRead():
        problems.append("command or body differs")
    return problems


def bench_encode(
    settings: Settings, log: Callable[[str], None], ours_only: bool = False
) -> list[Row]:
    rows: list[Row] = []
    count = settings.encode_frames
    for adapter in encoders(ours_only):
        log(f"encode {adapter.name}")
        encode = adapter.prepare(ENCODE_HEADERS, ENCODE_BODY)
        row = Row("encode", "send", None, adapter.name, count, 0)
        try:
            sample = encode()
            row.nbytes = len(sample) * count
            row.problems = check_encoded(sample)

            def run(encode: Callable[[], bytes] = encode) -> int:
                for _ in range(count):
                    encode()
                return count

            run()  # warm-up
            row.best_s, row.runs = best_time(run, count, settings)
        except Exception as exc:
            row.problems.append(f"{type(exc).__name__}: {exc}")
        row.ok = not row.problems
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- memory


def _traced_peak(action: Callable[[], None]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        action()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def bench_memory(settings: Settings, log: Callable[[str], None]) -> dict[str, Any]:
    """Peak allocations while decoding one large body, and many small frames in one chunk."""
    size = settings.big_body
    log(f"memory: one {size // MiB} MiB body in 64 KiB reads")
    head = f"MESSAGE\ndestination:/queue/big\ncontent-length:{size}\n\n".encode()
    stream = head + bytes(range(256)) * (size // 256) + b"\x00"
    limits = stomp_proto.Limits(max_body_size=2 * size, max_frame_size=2 * size + len(head))
    got: list[int] = []

    def decode_big() -> None:
        decoder = stomp_proto.FrameDecoder("1.2", limits=limits)
        for i in range(0, len(stream), 64 * KiB):
            decoder.receive_data(stream[i : i + 64 * KiB])  # a fresh bytes object, like recv()
            got.extend(len(f.body) for f in decoder if isinstance(f, stomp_proto.Frame))

    big_peak = _traced_peak(decode_big)
    if got != [size]:
        raise AssertionError(f"big body decoded as {got}")

    log("memory: 10,000 small frames in one chunk")
    frames = small_frames(10_000, random.Random(7))
    chunk = b"".join(wire(f.command, f.headers, f.body) for f in frames)
    counted: list[int] = []

    def decode_many() -> None:
        decoder = stomp_proto.FrameDecoder("1.2")
        decoder.receive_data(chunk)
        counted.append(sum(1 for _ in decoder))  # each frame dropped once counted

    many_peak = _traced_peak(decode_many)
    if counted != [len(frames)]:
        raise AssertionError(f"{counted} small frames instead of {len(frames)}")
    return {
        "big_body_bytes": size,
        "big_body_peak_bytes": big_peak,
        "big_body_peak_ratio": big_peak / size,
        "small_chunk_frames": len(frames),
        "small_chunk_bytes": len(chunk),
        "small_chunk_peak_bytes": many_peak,
        "small_chunk_peak_ratio": many_peak / len(chunk),
    }


# --------------------------------------------------------------------------- report


@dataclass
class Target:
    name: str
    build: str
    goal: str
    value: float | None
    met: bool | None


def _fastest(rows: list[Row], names: set[str] | None = None) -> Row | None:
    timed = [
        r
        for r in rows
        if r.codec not in (*BUILDS, FLOOR)
        and r.ok
        and r.best_s
        and (names is None or r.codec in names)
    ]
    return min(timed, key=lambda r: r.best_s or 0.0, default=None)


def _group(rows: list[Row]) -> dict[tuple[str, str, int | None], list[Row]]:
    groups: dict[tuple[str, str, int | None], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.group, row.workload, row.read_size), []).append(row)
    return groups


Key = tuple[str, str, int | None, str]  # group, workload, read size, build
RowKey = tuple[str, str, int | None]  # group, workload, read size


def ratios(rows: list[Row]) -> dict[Key, dict[str, Any]]:
    """Per (group, workload, read size, build): speed of our build over the fastest peer and
    the floor's time."""
    out: dict[Key, dict[str, Any]] = {}
    for (group_name, workload, read_size), group in _group(rows).items():
        fastest = _fastest(group)
        escaping = _fastest(group, {"stompest", "stompman"})
        floor = next((r for r in group if r.codec == FLOOR and r.ok and r.best_s), None)
        for build in BUILDS:
            ours = next((r for r in group if r.codec == build and r.ok and r.best_s), None)
            if ours is None or ours.best_s is None:
                continue
            entry: dict[str, Any] = {}
            if fastest and fastest.best_s:
                entry["fastest_peer"] = fastest.codec
                entry["vs_fastest_peer"] = fastest.best_s / ours.best_s
            if group_name == "encode" and escaping and escaping.best_s:
                entry["fastest_escaping_peer"] = escaping.codec
                entry["vs_fastest_escaping_peer"] = escaping.best_s / ours.best_s
            if floor and floor.best_s:
                entry["time_vs_floor"] = ours.best_s / floor.best_s
            out[(group_name, workload, read_size, build)] = entry
    return out


def targets(rows: list[Row]) -> list[Target]:
    rat = ratios(rows)
    found: list[Target] = []
    builds = [b for b in BUILDS if any(r.codec == b for r in rows)]
    for build in builds:
        for read_size in READ_SIZES:
            small = rat.get(("decode", "small", read_size, build), {}).get("vs_fastest_peer")
            found.append(
                Target(
                    f"small-frame decode, {_size(read_size)} reads",
                    build,
                    ">= 5x fastest peer",
                    small,
                    None if small is None else small >= 5,
                )
            )
            if read_size == 1:
                continue
            floor = rat.get(("decode", "1m", read_size, build), {}).get("time_vs_floor")
            found.append(
                Target(
                    f"1 MiB decode, {_size(read_size)} reads",
                    build,
                    "<= 1.5x scan-floor time",
                    floor,
                    None if floor is None else floor <= 1.5,
                )
            )
        enc = rat.get(("encode", "send", None, build), {}).get("vs_fastest_escaping_peer")
        found.append(
            Target(
                "encode SEND",
                build,
                ">= 3x fastest escaping peer (stompest, stompman)",
                enc,
                None if enc is None else enc >= 3,
            )
        )
    return found


def _si(value: float | None) -> str:
    if value is None:
        return "-"
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:.2f}{suffix}"
    return f"{value:.1f}"


def _size(n: int | None) -> str:
    if n is None:
        return ""
    for unit, suffix in ((MiB, "MiB"), (KiB, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {suffix}"
    return f"{n} B"


def _note(row: Row, ours: Row | None, entry: dict[str, Any]) -> str:
    """The ratio column: our builds against the others, and any check that failed."""
    parts: list[str] = []
    if not row.best_s:
        parts.append("not timed")
    elif row.codec in BUILDS:
        if "vs_fastest_peer" in entry:
            fastest = f"{entry['vs_fastest_peer']:.2f}x the fastest peer"
            parts.append(f"{fastest} ({entry['fastest_peer']})")
        if "vs_fastest_escaping_peer" in entry:
            parts.append(
                f"{entry['vs_fastest_escaping_peer']:.2f}x the fastest escaping peer "
                f"({entry['fastest_escaping_peer']})"
            )
        if "time_vs_floor" in entry:
            parts.append(f"{entry['time_vs_floor']:.2f}x the floor's time")
    elif ours and ours.best_s:
        parts.append(f"ours is {row.best_s / ours.best_s:.2f}x as fast")
    note = "; ".join(parts)
    if row.problems:
        note += f"  [{'MISMATCH' if row.best_s else 'ERROR'}: {row.problems[0]}]"
    return note


def format_table(rows: list[Row]) -> str:
    rat = ratios(rows)
    header = (
        f"{'workload':<8} {'read':>7}  {'codec':<18} {'frames':>6} {'MB':>8} {'best ms':>9} "
        f"{'frames/s':>9} {'MB/s':>8} {'runs':>4}  ratio"
    )
    lines = [header, "-" * len(header)]
    previous: tuple[str, str, int | None] | None = None
    for key, group in _group(rows).items():
        if previous is not None:
            lines.append("")
        previous = key
        ours = next((r for r in group if r.codec == OURS and r.best_s), None)
        for row in group:
            entry = rat.get((*key, row.codec), {})
            note = _note(row, ours, entry)
            ms = f"{row.best_s * 1e3:.2f}" if row.best_s else "-"
            lines.append(
                f"{row.workload:<8} {_size(row.read_size):>7}  {row.codec:<18} {row.frames:>6} "
                f"{row.nbytes / 1e6:>8.3f} {ms:>9} {_si(row.frames_per_s):>9} "
                f"{_si(row.mb_per_s):>8} {row.runs:>4}  {note}".rstrip()
            )
    return "\n".join(lines)


def _memory_lines(build: str, memory: dict[str, Any]) -> list[str]:
    return [
        f"Memory ({build}, tracemalloc peak of new allocations):",
        f"  one {_size(memory['big_body_bytes'])} body in 64 KiB reads: "
        f"{memory['big_body_peak_bytes'] / MiB:.1f} MiB = "
        f"{memory['big_body_peak_ratio']:.2f}x the body",
        f"  {memory['small_chunk_frames']:,} small frames in one "
        f"{memory['small_chunk_bytes'] / MiB:.2f} MiB chunk: "
        f"{memory['small_chunk_peak_bytes'] / MiB:.2f} MiB = "
        f"{memory['small_chunk_peak_ratio']:.2f}x the chunk",
        "",
    ]


def report(
    rows: list[Row],
    memory: dict[str, dict[str, Any]],
    workloads: list[Workload],
    settings: Settings,
) -> str:
    out = [
        f"stomp_proto codec benchmark ({'quick' if settings.quick else 'full'}) - "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"best {settings.clock} time of <= {settings.repeats} runs, gc enabled, "
        f"malloc {'pinned' if settings.malloc_pinned else 'as configured'}",
        "Versions: " + ", ".join(f"{name} {version}" for name, version in versions().items()),
        "",
        "Workloads (MESSAGE frames, 1.2, escaped header values):",
    ]
    out += [
        f"  {w.key:<6} {w.title} x {len(w.frames)} frames = {len(w.stream):,} B" for w in workloads
    ]
    out += [
        f"  1 B reads use only the first frames that fit in {settings.one_byte_frames} frames and "
        f"{settings.one_byte_bytes // KiB} KiB (none for 1m).",
        f"  encode: SEND, 8 headers (4 need escaping) + content-length, {len(ENCODE_BODY)} B body,"
        f" x {settings.encode_frames} per run.",
    ]
    if any(r.codec == ACCELERATED for r in rows):
        out.append(
            f"  {ACCELERATED}: the same source with its native fast path"
            " (scripts/build_accelerated.py), timed in a subprocess of this run."
        )
    out += ["", format_table(rows), ""]
    for build, figures in memory.items():
        out += _memory_lines(build, figures)
    out.append("Targets (reported, not enforced):")
    for target in targets(rows):
        verdict = {True: "met", False: "MISSED", None: "n/a"}[target.met]
        value = "-" if target.value is None else f"{target.value:.2f}x"
        name = f"{target.name} ({'accelerated' if target.build == ACCELERATED else 'pure'})"
        out.append(f"  [{verdict:^6}] {name:<42} {value:>7}  (goal {target.goal})")
    return "\n".join(out)


def versions() -> dict[str, str]:
    """Installed versions of the distributions under test."""
    found: dict[str, str] = {}
    for dist in ("stomp-proto", "stompest", "stomp.py", "stompman", "mypy"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = "source tree" if dist == "stomp-proto" and stomp_proto else "missing"
    return found


def to_json(
    rows: list[Row], memory: dict[str, dict[str, Any]], settings: Settings
) -> dict[str, Any]:
    return {
        "meta": {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "stomp_proto_available": stomp_proto is not None,
            "versions": versions(),
            "settings": asdict(settings),
        },
        "rows": [
            {**asdict(r), "frames_per_s": r.frames_per_s, "mb_per_s": r.mb_per_s} for r in rows
        ],
        "ratios": [
            {"group": g, "workload": w, "read_size": s, "build": b, **entry}
            for (g, w, s, b), entry in ratios(rows).items()
        ],
        "memory": memory,
        "targets": [asdict(t) for t in targets(rows)],
    }


# --------------------------------------------------------------------------- accelerated build


def run_worker(args: argparse.Namespace, source: Path, name: str) -> dict[str, Any]:
    """Time the stomp_proto package in ``source`` (a directory that holds one) in a subprocess.

    This script runs again with ``STOMP_PROTO_BENCH_PATH`` pointing at ``source``;
    it times only stomp_proto's rows, names them ``name`` and returns them (with
    the memory figures, unless comparing with --against).
    """
    with tempfile.TemporaryDirectory(prefix="stomp-proto-bench-") as work:
        out = Path(work, "rows.json")
        command = [sys.executable, __file__, "--worker", str(out)]
        command += ["--quick"] if args.quick else []
        command += ["--repeats", str(args.repeats)] if args.repeats else []
        command += ["--verbose"] if args.verbose else []
        command += ["--system-malloc"] if args.system_malloc else []
        command += ["--cpu-time"] if args.cpu_time else []
        command += ["--rows-only"] if args.against else []
        env = {
            **os.environ,
            "STOMP_PROTO_BENCH_PATH": str(source),
            "STOMP_PROTO_BENCH_NAME": name,
        }
        subprocess.run(command, env=env, check=True)
        result: dict[str, Any] = json.loads(out.read_text())
    return result


def run_accelerated_worker(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    """Build the accelerated package in a temporary directory and time it in a subprocess.

    The pure and the accelerated build import the same module names, so they
    cannot share one process; the worker's rows are merged into this run's table.
    """
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_accelerated  # scripts/ is not a package; only --accelerated needs it

    with tempfile.TemporaryDirectory(prefix="stomp-proto-accelerated-") as work:
        log("accelerated: building the native fast path")
        target = build_accelerated.copy_package(Path(work))
        build_accelerated.build(target)
        log("accelerated: timing it in a subprocess")
        return run_worker(args, target, ACCELERATED)


def worker(path: Path, settings: Settings, log: Callable[[str], None], rows_only: bool) -> int:
    """The subprocess of --accelerated and --against: stomp_proto's rows, written to ``path``."""
    if stomp_proto is None:
        print(f"worker: stomp_proto is not importable from {_WORKER_PATH}", file=sys.stderr)
        return 3
    workloads = make_workloads(settings.quick)
    rows = bench_decode(workloads, settings, log, ours_only=True)
    rows += bench_encode(settings, log, ours_only=True)
    memory = {} if rows_only else bench_memory(settings, log)
    path.write_text(json.dumps({"rows": [asdict(r) for r in rows], "memory": memory}))
    return 0


# --------------------------------------------------------------------------- --against


def compare(args: argparse.Namespace, log: Callable[[str], None]) -> int:
    """Time this tree and another checkout side by side; report each row's change.

    Each round times both in fresh subprocesses, one after the other, the
    order swapped every round, so that a machine that slows down or speeds up
    during the run weighs on both alike; each row keeps its best time over
    all rounds.  Nothing is enforced: the exit status is 2 only when either
    build decodes or encodes wrongly.
    """
    other = args.against.resolve()
    if not (other / "stomp_proto" / "__init__.py").is_file():
        print(f"--against: no stomp_proto package in {other}", file=sys.stderr)
        return 3
    builds = [(ROOT, OURS), (other, BASELINE)]
    best: dict[tuple[str, RowKey], Row] = {}
    for round_ in range(args.rounds):
        for source, name in builds if round_ % 2 == 0 else builds[::-1]:
            log(f"round {round_ + 1}/{args.rounds}: {name} from {source}")
            for fields in run_worker(args, source, name)["rows"]:
                row = Row(**fields)
                slot = (name, (row.group, row.workload, row.read_size))
                kept = best.get(slot)
                if (
                    kept is None
                    or not row.ok
                    or (kept.ok and row.best_s is not None and row.best_s < (kept.best_s or 1e9))
                ):
                    best[slot] = row
    lines = [
        f"stomp_proto codec: {ROOT} against {other}",
        f"best of {args.rounds} rounds, alternating order; change = time here / time there - 1",
        "",
        f"{'workload':<10}{'read':>8}  {'here ms':>9}  {'there ms':>9}  {'change':>8}",
        "-" * 52,
    ]
    slower: list[str] = []
    comparison: list[dict[str, Any]] = []
    for (name, key), here in best.items():
        if name != OURS:
            continue
        there = best.get((BASELINE, key))
        group, workload, read_size = key
        label = workload if group == "decode" else f"{group} {workload}"
        change = None
        if there is not None and here.best_s and there.best_s:
            change = here.best_s / there.best_s - 1
        text = "-" if change is None else f"{change:+.1%}"
        flag = "  SLOWER" if change is not None and change > SLOWER else ""
        if flag:
            slower.append(label)
        there_ms = f"{there.best_s * 1e3:9.2f}" if there and there.best_s else f"{'-':>9}"
        here_ms = f"{here.best_s * 1e3:9.2f}" if here.best_s else f"{'-':>9}"
        lines.append(f"{label:<10}{_size(read_size):>8}  {here_ms}  {there_ms}  {text:>8}{flag}")
        comparison.append(
            {
                "group": group,
                "workload": workload,
                "read_size": read_size,
                "here_s": here.best_s,
                "there_s": there.best_s if there else None,
                "change": change,
            }
        )
    lines += ["", f"rows more than {SLOWER:.0%} slower here: {', '.join(slower) or 'none'}"]
    print("\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        meta = {"here": str(ROOT), "there": str(other), "rounds": args.rounds}
        args.json.write_text(json.dumps({"meta": meta, "rows": comparison}, indent=2) + "\n")
    broken = [row for row in best.values() if not row.ok]
    for row in broken:
        print(f"{row.codec} {row.workload}: {'; '.join(row.problems)}", file=sys.stderr)
    return 2 if broken else 0


def merge(rows: list[Row], extra: list[Row]) -> list[Row]:
    """``rows`` with each row of ``extra`` placed after the pure build's row of its group."""
    merged: list[Row] = []
    by_key = {(r.group, r.workload, r.read_size): r for r in extra}
    for row in rows:
        merged.append(row)
        if row.codec == OURS and (key := (row.group, row.workload, row.read_size)) in by_key:
            merged.append(by_key.pop(key))
    return merged + list(by_key.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small workloads, few runs")
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write results as JSON")
    parser.add_argument("--svg", metavar="PATH", type=Path, help="also write a bar chart (SVG)")
    parser.add_argument(
        "--accelerated",
        "--mypyc",  # its name until the native fast path replaced the mypyc build
        dest="accelerated",
        action="store_true",
        help="also build and time the accelerated build (scripts/build_accelerated.py)",
    )
    parser.add_argument("--repeats", type=int, help="timed runs per row (default 5, quick 2)")
    parser.add_argument("--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time each run in this process's CPU time, not wall time (for a loaded machine)",
    )
    parser.add_argument(
        "--system-malloc", action="store_true", help="leave glibc's malloc thresholds alone"
    )
    parser.add_argument(
        "--against",
        metavar="DIR",
        type=Path,
        help="time stomp_proto here and in another checkout DIR side by side, and nothing else",
    )
    parser.add_argument(
        "--rounds", type=int, default=5, help="with --against: alternating rounds (default 5)"
    )
    parser.add_argument("--worker", metavar="PATH", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--rows-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        if args.verbose:
            print(message, file=sys.stderr, flush=True)

    pinned = False if args.system_malloc else pin_malloc()
    settings = settings_for(args.quick, args.repeats, pinned, "cpu" if args.cpu_time else "wall")
    if args.worker:
        return worker(args.worker, settings, log, args.rows_only)
    if args.against:
        return compare(args, log)
    if stomp_proto is None:
        print("stomp_proto is not importable: timing the peers only.\n")
    workloads = make_workloads(args.quick)
    rows = bench_decode(workloads, settings, log) + bench_encode(settings, log)
    memory: dict[str, dict[str, Any]] = {}
    if stomp_proto:
        memory[OURS] = bench_memory(settings, log)
    if args.accelerated:
        accelerated = run_accelerated_worker(args, log)
        rows = merge(rows, [Row(**r) for r in accelerated["rows"]])
        memory[ACCELERATED] = accelerated["memory"]
    print(report(rows, memory, workloads, settings))
    results = to_json(rows, memory, settings)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    if args.svg:
        args.svg.parent.mkdir(parents=True, exist_ok=True)
        args.svg.write_text(chart.render(results))
    ours_broken = [r for r in rows if r.codec in BUILDS and not r.ok]
    return 2 if ours_broken else 0


if __name__ == "__main__":
    sys.exit(main())
