"""``JobFollower``: the order of output and state lines, and the final state it returns.

A scripted client stands in for the coordinator's answers, so the race the real one can
show (every rank's log complete one poll before the job's state says it ended) happens
on every run.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from labgang.launcher.api.client import LogChunk
from labgang.launcher.cli.follow import JobFollower

if TYPE_CHECKING:
    from typing_extensions import Buffer


class ScriptedClient:
    """Answers ``job()`` from a list of states (the last one repeats) and serves one log."""

    def __init__(self, states: list[str], log: bytes, started_at: float | None = None) -> None:
        self.states = states
        self.log = log
        self.job_calls = 0
        self.started_at = started_at  # the view's start_time once the job has left pending/admitted

    def job(self, job_id: str) -> dict:
        state = self.states[min(self.job_calls, len(self.states) - 1)]
        self.job_calls += 1
        return {
            "id": job_id,
            "state": state,
            "queue": "default",
            "nodes": ["vm"],
            "reason": None,
            "exit_status": 0 if state == "succeeded" else None,
            "start_time": None if state in ("pending", "admitted") else self.started_at,
        }

    def logs(self, job_id: str, rank: int = 0, offset: int = 0) -> LogChunk:
        data = self.log[offset:]
        # The log says "finished" already: the rank is gone, the job's state lags one poll.
        return LogChunk(data=data, next_offset=offset + len(data), finished=True)


def test_logs_complete_before_the_state_says_ended_still_return_the_final_state():
    client = ScriptedClient(["running", "running", "succeeded"], b"hi\n")
    out, err = io.BytesIO(), io.StringIO()
    final = JobFollower(client, "7", (0,), out, err, poll_s=0.001).follow()
    assert final["state"] == "succeeded"  # not the stale "running" of the last poll before the logs ended
    assert out.getvalue() == b"hi\n"
    assert err.getvalue().splitlines() == ["labgang: job 7 running on vm", "labgang: job 7 succeeded (exit status 0)"]


def test_the_final_line_comes_after_the_output():
    client = ScriptedClient(["succeeded"], b"0-out\n")
    order: list[str] = []

    class Err(io.StringIO):
        def write(self, text: str) -> int:
            order.append("state")
            return super().write(text)

    class Out(io.BytesIO):
        def write(self, data: Buffer) -> int:
            order.append("output")
            return super().write(data)

    JobFollower(client, "8", (0,), Out(), Err(), poll_s=0.001).follow()
    assert order and order[-1] == "state" and "output" in order
    assert order.index("output") < order.index("state")


def test_a_run_that_ends_between_two_polls_still_says_where_it_ran_before_its_output():
    """The poll never sees "running" (the job went from pending to succeeded between two polls):
    its start time says it ran, so the "running on" line comes all the same, once, before the
    output, and the final line after it."""
    client = ScriptedClient(["pending", "succeeded"], b"out\n", started_at=100.0)
    lines: list[str] = []

    class Err(io.StringIO):
        def write(self, text: str) -> int:
            lines.extend(f"state: {t}" for t in text.splitlines() if t)
            return len(text)

    class Out(io.BytesIO):
        def write(self, data: Buffer) -> int:
            lines.append(f"output: {bytes(data).decode()}")
            return len(bytes(data))

    JobFollower(client, "9", (0,), Out(), Err(), poll_s=0.001).follow()
    assert lines == [
        "state: labgang: job 9 running on vm",
        "output: out\n",
        "state: labgang: job 9 succeeded (exit status 0)",
    ]


def test_a_run_first_seen_terminating_says_where_it_ran_first():
    client = ScriptedClient(["pending", "terminating", "terminating", "failed"], b"", started_at=5.0)
    err = io.StringIO()
    JobFollower(client, "3", (0,), io.BytesIO(), err, poll_s=0.001).follow()
    assert err.getvalue().splitlines() == [
        "labgang: job 3 running on vm",
        "labgang: job 3 terminating",
        "labgang: job 3 failed",
    ]


def test_a_failed_run_names_the_command_that_shows_the_failed_ranks_output():
    class FailedClient(ScriptedClient):
        def job(self, job_id: str) -> dict:
            view = super().job(job_id)
            if view["state"] == "failed":
                view["exit_status"] = 7
                view["reason"] = {"code": "failed", "message": "rank 1 on vm exited with status 7"}
                view["ranks"] = [{"rank": 0, "exit_status": 143}, {"rank": 1, "exit_status": 7}]
            return view

    client = FailedClient(["running", "failed"], b"", started_at=5.0)
    err = io.StringIO()
    JobFollower(client, "4", (0,), io.BytesIO(), err, poll_s=0.001).follow()
    assert err.getvalue().splitlines()[-2:] == [
        "labgang: job 4 failed (exit status 7): rank 1 on vm exited with status 7",
        "labgang: rank 1's output: labgang logs 4 --rank 1",
    ]


class RequeuedClient:
    """A job requeued while followed: attempt 0 wrote ``data\\n`` and its last line ``tail`` after the
    follower's first read; attempt 1's log is shorter than the offset attempt 0 reached, and one
    poll later grows. The coordinator says which attempt each answer read (``X-Attempt``)."""

    def __init__(self) -> None:
        self.logs_by_attempt = {0: b"data\ntail", 1: b"again\n"}
        self.current = 0
        self.polls = 0

    def job(self, job_id: str) -> dict:
        self.polls += 1
        if self.polls == 2:
            self.current = 1  # requeued and running again between the first and second poll
        state = "running" if self.polls < 4 else "succeeded"
        return {
            "id": job_id,
            "state": state,
            "queue": "q",
            "nodes": ["vm"],
            "reason": None,
            "exit_status": 0 if state == "succeeded" else None,
            "start_time": 1.0,
        }

    def logs(
        self, job_id: str, rank: int = 0, offset: int = 0, attempt: int | None = None, stream: str | None = None
    ) -> LogChunk:
        number = self.current if attempt is None else attempt
        log = self.logs_by_attempt[number]
        if number == 0 and self.polls == 1:
            log = log[:5]  # "tail" not written yet at the first read
        data = log[offset:]
        done = self.polls >= 4 or number != self.current
        return LogChunk(data=data, next_offset=offset + len(data), finished=done, attempt=number)


def test_a_requeued_job_is_followed_from_the_first_byte_of_its_new_attempt():
    out = io.BytesIO()
    JobFollower(RequeuedClient(), "5", (0,), out, None, poll_s=0.001).follow()
    assert out.getvalue() == b"data\ntail\n" + b"again\n"  # the old attempt's cut line ended, not glued on


def test_a_requeued_gang_is_followed_from_the_first_byte_of_each_ranks_new_attempt():
    out = io.BytesIO()
    JobFollower(RequeuedClient(), "5", (0, 1), out, None, poll_s=0.001).follow()
    lines = out.getvalue().decode().splitlines()
    for rank in (0, 1):
        assert [line for line in lines if line.startswith(f"{rank}: ")] == [
            f"{rank}: {t}" for t in ("data", "tail", "again")
        ]


def test_a_node_that_does_not_answer_a_log_read_is_read_again_at_the_next_poll():
    """A 503 on a log read (the rank's node not answering: labgang shutting down, its agent gone
    first) is not the follower's end: the second new user's ``labgang run`` printed ``--rank: cannot
    read the log of rank 0: node vm: disconnected`` instead of what happened to its job. The read
    is tried again at the next poll, and the output and the job's end come as they are."""
    from labgang.launcher.api.client import ApiError

    class FlakyNode(ScriptedClient):
        refused = 0

        def logs(self, job_id: str, rank: int = 0, offset: int = 0) -> LogChunk:
            if self.refused < 2:
                self.refused += 1
                raise ApiError(503, "cannot read the log of rank 0: node vm: disconnected", field="rank")
            return super().logs(job_id, rank, offset)

    client = FlakyNode(["running", "running", "running", "cancelled"], b"partial\n", started_at=1.0)
    out, err = io.BytesIO(), io.StringIO()
    final = JobFollower(client, "9", (0,), out, err, poll_s=0.001).follow()
    assert client.refused == 2 and final["state"] == "cancelled"
    assert out.getvalue() == b"partial\n"
