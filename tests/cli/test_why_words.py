"""What a user is told about why, through a real ``labgang up --simulate --config`` (8 x H100, a
two-team cohort, MPS and shards on), as the new user met it:

- a queue whose own nominal quota is lent to a borrower and that never reclaims is told so (who
  borrows it, that it does not reclaim, that it waits), and ``explain`` adds no fair-sharing
  sentence when fair sharing is off;
- a share of a card is described as the share (``1 x mps:50``, ``1 x shard:1``), not a whole gpu,
  in ``show``'s submitted line and ``explain``'s first sentence;
- ``explain QUEUE`` says who may submit there and whether the caller (a real Unix user) may.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from up_harness import WAIT_S, Up, running_up, shared_up

pytestmark = pytest.mark.slow

CONFIG = """
default_queue = "vision"

[sharing]
shards_per_gpu = 4
mps = true

[[cohorts]]
name = "lab"

[[queues]]
name = "vision"
cohort = "lab"
nominal = { gpu = 2 }

[[queues]]
name = "shared"
cohort = "lab"
nominal = { gpu = 2 }

[[queues]]
name = "nlp"
cohort = "lab"
nominal = { gpu = 4 }
share_gpus = "queue"
"""


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgwhy", CONFIG)


def text_of(up: Up, *args: str) -> str:
    out = up.cli(*args)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_queue_whose_nominal_is_lent_and_that_never_reclaims_is_told_it_waits(up: Up) -> None:
    borrower = up.submit("-q", "vision", "-n", "1", "-g", "8", "--", "sleep", "300")  # 2 own + 6 lent
    up.wait_state(borrower, {"running"})
    waiting = up.submit("-q", "shared", "-n", "2", "-g", "1", "--", "sleep", "300")
    try:
        deadline = time.monotonic() + WAIT_S
        view = up.wait_state(waiting, {"pending"})
        while (view["reason"] or {}).get("code") != "cohort_exhausted":  # until a cycle has looked at it
            assert time.monotonic() < deadline, view
            time.sleep(0.1)
            view = up.wait_state(waiting, {"pending"})
        told = (
            "shared uses 0 of 2 gpu and can get 0 more: shared's 2 unused nominal gpu are lent to vision "
            "(borrowing); shared does not reclaim (reclaim_within_cohort = never): it waits for them to end"
        )
        assert told in view["reason"]["message"], view["reason"]
        explained = text_of(up, "explain", waiting)
        assert told in explained, explained
        assert "fair sharing" not in explained, explained  # fair sharing is off in this config
    finally:
        up.cli("cancel", borrower, waiting)


def test_a_share_is_described_as_the_share_not_a_whole_gpu(up: Up) -> None:
    mps = up.submit("-q", "nlp", "--mps", "50", "--", "sleep", "300")
    shard = up.submit("-q", "nlp", "--shards", "1", "--", "sleep", "300")
    try:
        for job_id, what in ((mps, "1 x mps:50"), (shard, "1 x shard:1")):
            view = up.wait_state(job_id, {"running"})
            submitted = next(h["message"] for h in view["history"] if h["event"] == "submitted")
            assert submitted == f"by {view['user']} to queue nlp: {what}", submitted
            assert f"to queue nlp: {what}" in text_of(up, "show", job_id)
            first = text_of(up, "explain", job_id).splitlines()[0]
            assert first == f"job {job_id} ({what}) in queue nlp is running.", first
    finally:
        up.cli("cancel", mps, shard)


USERS_CONFIG = """
admins = ["root"]
default_queue = "vision"

[[queues]]
name = "vision"
nominal = {{ gpu = 4 }}

[[queues]]
name = "nlp"
nominal = {{ gpu = 4 }}
users = ["{allowed}", "root"]
"""


@pytest.fixture
def lab(lab_users) -> Iterator[tuple[Up, list]]:
    with shared_up("lgwhyu-", USERS_CONFIG.format(allowed=lab_users[1].user.name)) as up:
        yield up, lab_users


def test_explain_queue_says_who_may_submit_and_whether_the_caller_may(lab) -> None:
    up, (outsider, member) = lab
    env = {"LABGANG_STATE_DIR": str(up.state_dir)}
    told = outsider.run(["explain", "nlp"], env=env)
    assert told.returncode == 0, told.stderr
    lines = told.stdout.splitlines()
    assert f"Who may submit to nlp: users {member.user.name}, root (and admins)." in lines, told.stdout
    assert f"You ({outsider.user.name}) may not submit to nlp; you may submit to vision." in lines, told.stdout
    told = member.run(["explain", "nlp"], env=env)
    assert told.returncode == 0, told.stderr
    assert f"You ({member.user.name}) may submit to nlp." in told.stdout.splitlines(), told.stdout
    told = outsider.run(["explain", "vision"], env=env)
    assert "Anyone may submit to vision." in told.stdout.splitlines(), told.stdout
    queues = json.loads(outsider.run(["queues", "--json"], env=env).stdout)["queues"]
    assert {q["name"]: q["caller_may_submit"] for q in queues} == {"vision": True, "nlp": False}
