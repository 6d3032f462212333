"""Issue 25's done-when through a real ``labgang up --simulate --config`` (8 x H100, 4 shards per
card, MPS on): five one-shard jobs of one queue take one card and a fifth goes to a second; a
queue that may not share with them never lands on their cards; an ``--mps 50 --gpu-mem 20G``
rank's environment has the MPS limits; a shard job whose process uses more than its ``--gpu-mem``
(the simulated NVML's ``SIM_GPU_MEMORY_MIB``) gets a history line naming process, usage and
budget and, with ``violation = "kill"``, fails with that reason; ``nodes --gpus --json`` lists the
sharers of each card, ``nodes`` the shards used and free, and ``explain`` whether a share joined a
shared card or took a whole one."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest
from up_harness import WAIT_S, Up, running_up

pytestmark = pytest.mark.slow

CONFIG = """
default_queue = "team"
violation = "kill"

[sharing]
shards_per_gpu = 4
mps = true

[[queues]]
name = "team"
nominal = { gpu = 8 }
share_gpus = "queue"

[[queues]]
name = "other"
nominal = { gpu = 8 }
share_gpus = "queue"

[[queues]]
name = "guests"
nominal = { gpu = 8 }
"""


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgsh", CONFIG)


def card(up: Up, job_id: str) -> str:
    """The one device of a running one-rank job."""
    ((device,),) = [rank["devices"] for rank in up.wait_state(job_id, {"running"})["ranks"]]
    return device


def sharers_by_card(up: Up) -> dict[str, list[str]]:
    """``nodes --gpus --json``: each shared card's UUID to the jobs the agent sees sharing it."""
    out = up.cli("nodes", "--gpus", "--json")
    assert out.returncode == 0, out.stderr
    (node,) = json.loads(out.stdout)["nodes"]
    return {
        gpu["uuid"]: sorted(s["job"] for s in gpu["sharers"]) for gpu in node["inventory"]["gpus"] if gpu.get("sharers")
    }


def test_four_shards_share_one_card_a_fifth_takes_another_and_strangers_stay_off(up: Up) -> None:
    shards = [up.submit("--shards", "1", "--", "sleep", "300") for _ in range(5)]
    try:
        cards = [card(up, job) for job in shards]
        assert len(set(cards[:4])) == 1, cards  # the first four pack onto one card
        assert cards[4] != cards[0]  # the card is full: the fifth takes a second one
        # best fit would put another team shard on the fifth's card (3 shards free); the queue
        # `other` may not share with `team`, and `guests` may not share at all.
        stranger = up.submit("-q", "other", "--shards", "1", "--", "sleep", "300")
        whole = up.submit("-q", "guests", "--", "sleep", "300")
        assert card(up, stranger) not in cards
        assert card(up, whole) not in {*cards, card(up, stranger)}
        expected = {cards[0]: sorted(shards[:4]), cards[4]: [shards[4]], card(up, stranger): [stranger]}
        deadline = time.monotonic() + WAIT_S
        while (seen := sharers_by_card(up)) != expected:  # the agent's next inventory names them
            assert time.monotonic() < deadline, seen
            time.sleep(0.2)
        gpus_text = up.cli("nodes", "--gpus").stdout
        assert "shared by 4: shards 4/4 used, 0 free" in gpus_text
        assert "shared by 1: shards 1/4 used, 3 free" in gpus_text
        # explain: what the scheduler recorded at admission
        assert f"At admission it took whole card {cards[0]} of " in up.cli("explain", shards[0]).stdout
        joined = up.cli("explain", shards[1]).stdout
        assert f"At admission it joined card {cards[0]} of vm, already shared by 1 job(s): " in joined, joined
        assert (
            f"At admission it took whole card {card(up, stranger)} of vm: no shared card it may join had room "
            "(2 shard card(s) shared, 1 without room, 1 with room held by sharers its queue may not share with"
        ) in up.cli("explain", stranger).stdout
        # one line per node: 6 shards held; 3 + 3 free on the two part-used cards, 4 on each of the 4 idle cards;
        # MPS is on, and each idle card could serve it as well (100 % of its SMs free each)
        (line,) = up.cli("nodes").stdout.splitlines()[1:]
        assert line.split()[7] == "shard:6/22,mps:0/400", line
    finally:
        up.cli("cancel", *up.jobs())


def test_an_mps_rank_gets_its_sm_share_and_memory_limit_in_its_environment(up: Up) -> None:
    job = up.submit("--mps", "50", "--gpu-mem", "20G", "--", "sh", "-c", "env; sleep 300")
    try:
        device = card(up, job)
        deadline = time.monotonic() + WAIT_S
        while "CUDA_MPS_PIPE_DIRECTORY=" not in (logs := up.cli("logs", job).stdout):
            assert time.monotonic() < deadline, logs
            time.sleep(0.2)
        env = dict(line.split("=", 1) for line in logs.splitlines() if line.startswith("CUDA_"))
        assert env["CUDA_VISIBLE_DEVICES"] == device
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
        assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
        uuid = device.removeprefix("GPU-")
        assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(up.state_dir / "mps" / uuid / str(os.getuid()) / "pipe")
    finally:
        up.cli("cancel", job)


def test_a_shard_over_its_gpu_mem_budget_is_reported_and_killed_with_its_reason(up: Up) -> None:
    job = up.submit("--shards", "1", "--gpu-mem", "1G", "--", "env", "SIM_GPU_MEMORY_MIB=2048", "sleep", "300")
    view = up.wait_state(job, {"failed"})
    ((device,),) = [rank["devices"] for rank in view["ranks"]]
    pid = view["ranks"][0]["pid"]
    node = view["nodes"][0]
    line = f"rank 0 on {node} (pid {pid}) uses 2.0 GiB of device {device}, over its --gpu-mem budget of 1.0 GiB"
    assert [h["message"] for h in view["history"] if h["event"] == "gpu-mem-violation"] == [line]
    assert view["reason"]["message"] == f'device-memory budget exceeded (violation = "kill"): {line}'
    assert line in up.cli("show", job).stdout
