"""A rank log's stdout and stderr told apart (agent/supervisor/log_streams.py, the shim's marks file):
``read_log`` with ``stream`` keeps one, on real processes, across a rotation; the merged log is as before."""

from __future__ import annotations

import base64
import itertools

from labgang.agent.commands import CommandHandler
from labgang.agent.supervisor import RankState, Supervisor
from labgang.agent.supervisor.log_generations import read_logical
from labgang.agent.supervisor.log_streams import keep_stream, marks_path, stderr_spans


def _read(handler: CommandHandler, stream: str | None) -> bytes:
    answer = handler.read_log({"job_id": "job1", "rank": 0, "offset": 0, "stream": stream})
    return base64.b64decode(answer["data"])


def test_read_log_keeps_one_stream_and_both_without_one(sup, make_spec, h):
    sup.launch(make_spec(["sh", "-c", "echo out; echo err >&2; echo more; echo again >&2"]))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    handler = CommandHandler(sup, wake=lambda: None)
    assert _read(handler, "stdout") == b"out\nmore\n"
    assert _read(handler, "stderr") == b"err\nagain\n"
    assert sorted(_read(handler, None).splitlines()) == [b"again", b"err", b"more", b"out"]


def test_a_rank_without_stderr_has_no_marks_file_and_reads_whole_as_stdout(sup, make_spec, h):
    sup.launch(make_spec(["sh", "-c", "echo only-out"]))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert not marks_path(sup.log_path("job1", 0)).exists()
    handler = CommandHandler(sup, wake=lambda: None)
    assert (_read(handler, "stdout"), _read(handler, "stderr")) == (b"only-out\n", b"")


def test_the_marks_rotate_with_the_log(state_dir, make_spec, cleanup, h):
    sup = Supervisor(state_dir, allow_root=True, log_max_bytes=4096)
    cleanup.append(sup)
    # 300 lines of 20 bytes, every third one on stderr: more than one 4096-byte file holds
    script = (
        "i=0; while [ $i -lt 300 ]; do if [ $((i % 3)) -eq 0 ]; then printf 'err  %014d\\n' $i >&2; "
        "else printf 'out  %014d\\n' $i; fi; i=$((i+1)); done"
    )
    sup.launch(make_spec(["sh", "-c", script]))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    current = sup.log_path("job1", 0)
    previous = current.with_name(current.name + ".1")
    streams = {}
    for stream in ("stdout", "stderr"):
        before = keep_stream(previous.read_bytes(), 0, stderr_spans(previous), stream)
        after = keep_stream(current.read_bytes(), 0, stderr_spans(current), stream)
        # the rotation adds nothing to either stream: a line cut by it is whole again
        streams[stream] = (before + after).decode().splitlines()
        # and read by logical offset, 700 bytes at a time across both files, each stream comes the same
        offset, pieces = 0, []
        while offset < 6000:
            piece = read_logical(current, offset, 700, stream)
            assert piece.lost == 0 and piece.next_offset > offset
            pieces.append(piece.data)
            offset = piece.next_offset
        assert b"".join(pieces).decode().splitlines() == streams[stream]
    assert streams["stderr"] == [f"err  {i:014d}" for i in range(0, 300, 3)]
    assert streams["stdout"] == [f"out  {i:014d}" for i in range(300) if i % 3]


def test_keep_stream_splits_every_piece_of_a_log_at_any_offset():
    log = b"out1\nERR\nout2\nE2\nend"
    spans = [(5, 9), (14, 17)]
    for offset, length in itertools.product(range(len(log) + 1), repeat=2):
        piece = log[offset : offset + length]
        inside = range(offset, offset + len(piece))
        want_err = bytes(log[i] for i in inside if any(a <= i < b for a, b in spans))
        want_out = bytes(log[i] for i in inside if not any(a <= i < b for a, b in spans))
        assert keep_stream(piece, offset, spans, "stderr") == want_err
        assert keep_stream(piece, offset, spans, "stdout") == want_out
