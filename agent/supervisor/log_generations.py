"""Reading a rank log across its rotation by *logical* offset: bytes since the rank's first, whichever
of ``rank-R.log.1`` and ``rank-R.log`` holds them now.

The shim's ``RotatingLog`` (``shim.py``) keeps the *generations* file (``PATH.gen``): one line
``SEQ BASE1 BASE``, where ``.1`` starts (-1: none) and where the current file starts. ``SEQ`` is odd
while a rotation is under way; a reader reads the file, then the log, then the file again, and reads
again when they differ (a seqlock), so a piece never comes from the wrong file. A reader whose offset
is before ``.1``'s start lost those bytes: :func:`read_logical` says how many (``lost``), and goes on
from ``.1``'s start, so the follower is told in the answer, never by text in the output.

A follower that must lose nothing (``labgang run``) leaves the first offset it has still to read, of
any stream it follows, in ``PATH.reader`` (:func:`note_reader`); the shim holds a rotation back while
that offset is before the current file's start (until the follower is silent for ``shim.HOLD_IDLE_S``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from .log_streams import keep_stream, stderr_spans

GENERATIONS_SUFFIX = ".gen"
"""The same as ``shim.GENERATIONS_SUFFIX``."""

READER_SUFFIX = ".reader"
"""The same as ``shim.READER_SUFFIX``."""

RETRIES = 200
"""Reads of a log caught mid-rotation before giving up (each after a millisecond's wait)."""


@dataclass(frozen=True)
class LogPiece:
    """What one read of a rank log found.

    Attributes:
        data: the bytes (of ``stream`` alone when one was asked for).
        next_offset: the logical offset to ask for next (bytes since the rank's first).
        size: the log's logical size (every byte the rank has written so far).
        lost: bytes before the asked offset's piece that were discarded by rotation before being read
            (0 normally): ``data`` starts that many bytes after the offset asked for.
    """

    data: bytes
    next_offset: int
    size: int
    lost: int = 0


def _generations(path: Path) -> tuple[int, int, int] | None:
    """(seq, base of ``.1`` or -1, base of the current file), or None for a log without the file (never
    rotated, or written by a shim from before generations: one file, offsets are its own)."""
    try:
        text = path.with_name(path.name + GENERATIONS_SUFFIX).read_bytes()
    except FileNotFoundError:
        return None
    parts = text.split()
    if len(parts) != 3:
        return (1, -1, 0)  # cut short mid-write: read as a rotation under way
    seq, base1, base = (int(p) for p in parts)
    return seq, base1, base


def _read_file(path: Path, start: int, limit: int, stream: str | None) -> tuple[bytes, int]:
    """(up to ``limit`` bytes of ``path`` from its own offset ``start``, filtered to ``stream``; how many
    bytes of the file that piece covers); (b"", 0) when the file is not there."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            raw = f.read(limit)
    except FileNotFoundError:
        return b"", 0
    data = raw if stream is None else keep_stream(raw, start, stderr_spans(path), stream)
    return data, len(raw)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def read_logical(path: Path, offset: int, limit: int, stream: str | None = None) -> LogPiece:
    """Up to ``limit`` bytes of the rank log at ``path`` from logical ``offset``: from ``.1`` while the
    offset is in it (a piece never spans the two files), else from the current file.

    Raises:
        ValueError: ``stream`` is neither None, ``"stdout"`` nor ``"stderr"``.
    """
    for attempt in range(RETRIES):
        gens = _generations(path)
        if gens is None:  # never rotated (or a shim from before generations): one file, its own offsets
            data, covered = _read_file(path, offset, limit, stream)
            size = _file_size(path)
            if _generations(path) is None:
                return LogPiece(data, offset + covered, max(size, offset + covered))
            continue  # the first rotation began meanwhile
        seq, base1, base = gens
        if seq % 2:
            time.sleep(0.001)
            continue
        lost = 0
        at = offset
        if at < base:  # before the current file: in .1, or discarded
            first = base if base1 < 0 else base1
            if at < first:
                lost, at = first - at, first
        if at < base:
            older = path.with_name(path.name + ".1")
            data, covered = _read_file(older, at - base1, min(limit, base - at), stream)
        else:
            data, covered = _read_file(path, at - base, limit, stream)
        size = base + _file_size(path)
        if _generations(path) == gens:
            return LogPiece(data, at + covered, max(size, at + covered), lost)
        del attempt  # rotated while reading: once more, with the new generations
    raise OSError(f"{path}: the log kept rotating while it was read")


def note_reader(path: Path, needed: int) -> None:
    """Leave beside the log at ``path`` the first logical offset a follower has still to read (the
    lowest of the streams it follows), so the shim holds a rotation back until it has read ``.1``.
    Written through a rename: the shim never reads half of it."""
    target = path.with_name(f"{path.name}{READER_SUFFIX}")
    tmp = target.with_name(f"{target.name}.tmp.{os.getpid()}")
    tmp.write_bytes(b"%d" % max(0, needed))
    os.replace(tmp, target)
