"""What ``labgang up`` says as it stops: the reason each job ended (its owner's cancel is not
--no-requeue), and a job array's tasks folded as ``queue`` shows them."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.cli.up import shutdown_message
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.app import _shutdown_summary
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.store import Store
from labgang.launcher.model import JobState
from lifecycle_driver import Clock, event, start

ROOT = Caller(uid=0, user="root", admin=True)


@pytest.fixture
def coord(tmp_path: Path):
    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
    c = Coordinator(config, Store(tmp_path / "db"), clock=Clock())
    for node in ("n1", "n2"):
        c.agents.join(node, c.clock())
    yield c
    c.store.close()


def end_ranks(coord: Coordinator, job_id: str) -> None:
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "exited", 143)
        event(coord, node, job_id, rank, "gone", 143)


async def submit(coord: Coordinator, **fields) -> str:
    job = await coord.desk.submit(ROOT, {"argv": ["train"], "workers": 2, "gpus_per_worker": 4, **fields})
    return job.id


async def test_a_job_its_owner_cancelled_before_the_shutdown_is_not_called_no_requeue(coord: Coordinator) -> None:
    cancelled = await submit(coord, grace_s=30)
    start(coord, cancelled)
    await coord.desk.cancel(ROOT, cancelled)
    assert coord.jobs[cancelled].status.state == JobState.TERMINATING  # in its grace period
    held = await coord.stop_jobs_for_shutdown("stopped: labgang up shut down")
    end_ranks(coord, cancelled)
    summary = _shutdown_summary(coord.desk.get_job, coord.model.jobs.values(), held, True)
    assert summary["cancelled"] == [] and summary["user_cancelled"] == [cancelled]
    assert (
        shutdown_message(summary)
        == f"labgang up: stopped: stopped {cancelled} (cancelled by the user before the shutdown)"
    )


async def test_a_no_requeue_job_is_still_said_to_be_cancelled_for_it(coord: Coordinator) -> None:
    once = await submit(coord, requeue=False)
    start(coord, once)
    held = await coord.stop_jobs_for_shutdown("stopped: labgang up shut down")
    end_ranks(coord, once)
    summary = _shutdown_summary(coord.desk.get_job, coord.model.jobs.values(), held, True)
    assert summary["cancelled"] == [once] and summary["user_cancelled"] == []
    assert "(submitted with --no-requeue or by `labgang run`)" in shutdown_message(summary)


def test_pending_array_tasks_are_folded_as_queue_shows_them() -> None:
    pending = ["44", *(f"45_{i}" for i in range(3, 31)), "46", "47_0", "47_2"]
    line = shutdown_message({"pending": pending})
    assert line == ("labgang up: stopped: 32 pending jobs (44, 45_[3-30], 46, 47_[0,2]) wait for the next `labgang up`")


async def test_jobs_that_finish_as_they_stop_are_said_to_have_finished_not_to_run_again(coord: Coordinator) -> None:
    done, broken = await submit(coord), await submit(coord)
    for job_id in (done, broken):
        start(coord, job_id)
    event(coord, "n2", broken, 1, "exited", 3)  # failed before the shutdown: its rank 0 is being stopped
    held = await coord.stop_jobs_for_shutdown("stopped: labgang up shut down")
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, done, rank, "exited", 0)  # ignored SIGTERM, exited 0 within its grace
        event(coord, node, done, rank, "gone", 0)
    event(coord, "n1", broken, 0, "exited", 143)
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, broken, rank, "gone")
    summary = _shutdown_summary(coord.desk.get_job, coord.model.jobs.values(), held, True)
    assert (summary["succeeded"], summary["failed"], summary["requeued"]) == ([done], [broken], [])
    assert shutdown_message(summary) == (
        f"labgang up: stopped: {done} finished as it stopped (succeeded); {broken} finished as it stopped (failed)"
    )


async def test_only_jobs_whose_ranks_still_run_are_said_to_be_still_stopping(coord: Coordinator) -> None:
    ended, running = await submit(coord, grace_s=30), await submit(coord, grace_s=30)
    for job_id in (ended, running):
        start(coord, job_id)
    held = await coord.stop_jobs_for_shutdown("stopped: labgang up shut down")
    # Neither job's exits reached the coordinator; the local agent saw only `running`'s ranks alive.
    summary = _shutdown_summary(coord.desk.get_job, coord.model.jobs.values(), held, True, alive={running})
    assert (summary["unrecorded"], summary["unfinished"]) == ([ended], [running])
    line = shutdown_message(summary)
    assert f"{running} still stopping" in line and f"{ended} still stopping" not in line, line
    assert f"{ended} ended as it stopped, before labgang up recorded how" in line, line
    # Without a local agent to ask (a coordinator of its own), a job not heard from is still stopping.
    assert _shutdown_summary(coord.desk.get_job, coord.model.jobs.values(), held, True)["unfinished"] == [
        ended,
        running,
    ]
