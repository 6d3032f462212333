"""The shim's rank log held back for ``labgang run``'s follower (``RotatingLog(hold=True)``): it does not
rotate while the follower has not read all of ``.1``, nor before its first read; it rotates as before
once the follower has caught up, once it has been silent for ``HOLD_IDLE_S``, and for a job without one.
Reads go through ``read_logical``/``note_reader`` as the agent's ``read_log`` does."""

from __future__ import annotations

import os
from pathlib import Path

from labgang.agent.supervisor import shim
from labgang.agent.supervisor.log_generations import note_reader, read_logical

CAP = 4096
CHUNK = b"x" * 1000


def generations(path: Path) -> list[int]:
    """[seq, base of .1, base of the current file]; [0, -1, 0] before the first rotation (no file yet)."""
    gen = path.with_name(path.name + ".gen")
    return [int(x) for x in gen.read_text().split()] if gen.exists() else [0, -1, 0]


def read_all(path: Path, offset: int) -> tuple[bytes, int, int]:
    """(every byte from logical ``offset``, the offset reached, bytes lost), as a follower reads."""
    data, lost = b"", 0
    while True:
        piece = read_logical(path, offset, 1500)
        lost += piece.lost
        if piece.next_offset == offset:
            return data, offset, lost
        data += piece.data
        offset = piece.next_offset
        note_reader(path, offset)


def test_without_a_follower_the_log_rotates_at_its_cap(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.log"
    log = shim.RotatingLog(str(path), CAP, None, None)
    for _ in range(13):
        log.write(CHUNK)
    log.close()
    assert generations(path)[1:] == [2 * CAP, 3 * CAP]  # three rotations: two caps discarded
    data, reached, lost = read_all(path, 0)
    assert lost == 2 * CAP and reached == 13 * len(CHUNK) and data == (CHUNK * 13)[2 * CAP :]


def test_held_before_the_first_read_and_while_the_follower_is_behind(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.log"
    log = shim.RotatingLog(str(path), CAP, None, None, hold=True)
    for _ in range(13):  # 13,000 bytes before anyone read: one file, nothing rotated
        log.write(CHUNK)
    assert generations(path)[1:] == [-1, 0] and path.stat().st_size == 13000
    data, reached, lost = read_all(path, 0)
    assert (data, reached, lost) == (CHUNK * 13, 13000, 0)
    # the follower read it all: the file rotates once its position is looked at again
    written = 0
    while generations(path)[1] == -1:
        assert written <= shim.HOLD_CHECK_BYTES
        log.write(CHUNK)
        written += len(CHUNK)
    base = generations(path)[2]
    assert base > 13000 and generations(path)[1:] == [0, base]
    for _ in range(70):  # the follower reads nothing now: the rotation waits for it (70 kB, 17 caps)
        log.write(CHUNK)
    assert generations(path)[1:] == [0, base]
    data, reached, lost = read_all(path, 13000)
    log.close()
    assert lost == 0 and data == CHUNK * (written // len(CHUNK) + 70)


def test_a_silent_follower_no_longer_holds_the_rotation(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.log"
    log = shim.RotatingLog(str(path), CAP, None, None, hold=True)
    for _ in range(5):
        log.write(CHUNK)
    note_reader(path, 0)  # it read nothing yet, and then went quiet for longer than HOLD_IDLE_S
    reader = path.with_name(path.name + ".reader")
    past = os.stat(reader).st_mtime - shim.HOLD_IDLE_S - 5
    os.utime(reader, (past, past))
    log.opened_at -= shim.HOLD_IDLE_S + 5
    for _ in range(shim.HOLD_CHECK_BYTES // len(CHUNK) + 2 + 10):  # looked at once more, then 10 kB at the cap
        log.write(CHUNK)
    log.close()
    assert generations(path)[2] > 0  # rotated
    _, _, lost = read_all(path, 0)
    assert lost > 0  # and the follower, when it reads again, is told


def follow_while_writing(
    path: Path, log: shim.RotatingLog, want: bytes, *, noted: bool
) -> tuple[list[tuple[int, bytes]], int]:
    """Write ``want`` into ``log`` from a thread, 700 bytes a time, while reading it by logical offset
    (900 bytes a read), leaving the follower's position when ``noted``; ([(logical start, bytes)] read,
    bytes lost)."""
    import threading

    done = threading.Event()

    def write() -> None:
        for start in range(0, len(want), 700):
            log.write(want[start : start + 700])
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    pieces, offset, lost = [], 0, 0
    while not (done.is_set() and offset == len(want)):
        piece = read_logical(path, offset, 900)
        lost += piece.lost
        pieces.append((offset + piece.lost, piece.data))
        offset = piece.next_offset
        if noted:
            note_reader(path, offset)
    writer.join()
    log.close()
    return pieces, lost


WANT = b"".join(b"line %06d\n" % i for i in range(30000))  # 360 kB


def test_pieces_read_while_the_log_rotates_come_from_the_right_file(tmp_path: Path) -> None:
    """Hundreds of rotations (1 KiB cap, nothing held) while a follower reads: every piece is the bytes
    at its logical offset (the generations seqlock: never a piece of the wrong file), and what it read
    plus what it was told was lost is the whole output."""
    path = tmp_path / "rank-0.log"
    pieces, lost = follow_while_writing(path, shim.RotatingLog(str(path), 1024, None, None), WANT, noted=False)
    assert generations(path)[0] > 200  # it did rotate, many times
    for start, data in pieces:
        assert data == WANT[start : start + len(data)], start
    assert lost + sum(len(data) for _, data in pieces) == len(WANT)


def test_a_held_log_loses_nothing_to_a_follower_reading_while_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.log"
    log = shim.RotatingLog(str(path), 1024, None, None, hold=True)
    pieces, lost = follow_while_writing(path, log, WANT, noted=True)
    assert lost == 0 and b"".join(data for _, data in pieces) == WANT
