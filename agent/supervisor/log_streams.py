"""A rank log's two streams told apart: the log holds stdout and stderr as they arrived, and its
marks file (``PATH.stderr``, written by the shim's ``RotatingLog`` before each stderr piece) says which
byte ranges were stderr. ``read_log`` with ``stream`` (``agent/commands.py``) keeps one of them, so
``labgang run`` prints the rank's stdout on its stdout and its stderr on its stderr, as ``srun`` does.
"""

from __future__ import annotations

import bisect
from pathlib import Path

STREAMS = ("stdout", "stderr")
"""The streams a log read may keep (None: both, as they arrived)."""

STDERR_MARKS_SUFFIX = ".stderr"
"""The marks file is the log's path plus this (``agent/supervisor/shim.py`` writes it)."""


def marks_path(log_path: Path) -> Path:
    """The stderr marks file of the log at ``log_path``."""
    return log_path.with_name(log_path.name + STDERR_MARKS_SUFFIX)


def stderr_spans(log_path: Path) -> list[tuple[int, int]]:
    """The byte ranges ``[start, end)`` of the log at ``log_path`` that were the rank's stderr, sorted;
    [] when it has no marks file (no stderr yet, or a log from a shim that kept none). A last line cut
    short by a write under way is skipped (its bytes are not in the log yet either)."""
    try:
        text = marks_path(log_path).read_bytes()
    except FileNotFoundError:
        return []
    spans: list[tuple[int, int]] = []
    for line in text.split(b"\n")[:-1]:
        start, _, length = line.partition(b" ")
        if start.isdigit() and length.isdigit():
            spans.append((int(start), int(start) + int(length)))
    spans.sort()
    return spans


def keep_stream(data: bytes, offset: int, spans: list[tuple[int, int]], stream: str) -> bytes:
    """The bytes of ``data`` (read from the log at ``offset``) that belong to ``stream``.

    Args:
        data: a piece of the log. offset: where in the log it starts (bytes).
        spans: :func:`stderr_spans` of that log.
        stream: ``"stdout"`` or ``"stderr"``.

    Raises:
        ValueError: ``stream`` is not one of :data:`STREAMS`.
    """
    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {', '.join(STREAMS)}, got {stream!r}")
    end = offset + len(data)
    first = max(0, bisect.bisect_right(spans, (offset, offset)) - 1)
    pieces: list[bytes] = []
    at = offset  # how far the stdout side has been taken
    for start, stop in spans[first:]:
        if start >= end:
            break
        lo, hi = max(start, offset), min(stop, end)
        if lo >= hi:
            continue
        if stream == "stderr":
            pieces.append(data[lo - offset : hi - offset])
        else:
            pieces.append(data[at - offset : lo - offset])
            at = hi
    if stream == "stdout":
        pieces.append(data[at - offset :])
    return b"".join(pieces)
