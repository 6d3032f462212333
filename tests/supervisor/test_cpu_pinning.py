"""CPU pinning of ranks by their small parent, on real processes (this machine has few CPUs: the
tests pin to one CPU of the two or more the test process may use, so the mask visibly narrows),
and torchrun's PET_* variables in the rank environment."""

from __future__ import annotations

import os

import pytest
from labgang.agent.supervisor import InvalidSpec, LaunchSpec, RankState
from labgang.agent.supervisor.environment import contract_variables

ALLOWED = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(ALLOWED) < 2, reason="pinning is only visible with two or more usable CPUs")


def rank_report(sup, make_spec, h, **overrides) -> tuple[str, str, str]:
    """Run a rank that prints its Cpus_allowed_list and LABGANG_CPUS; return both and the whole log."""
    script = (
        "import os\n"
        "status = open(f'/proc/{os.getpid()}/status').read().splitlines()\n"
        "print([l.split(':', 1)[1].strip() for l in status if l.startswith('Cpus_allowed_list')][0])\n"
        "print(os.environ['LABGANG_CPUS'])\n"
    )
    sup.launch(make_spec([h.python, "-c", script], **overrides))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    lines = [line for line in sup.log_path("job1", 0).read_text().splitlines()]
    return lines[-2], lines[-1], "\n".join(lines)


@needs_two
def test_rank_is_pinned_to_its_numa_node_cpus(sup, make_spec, h):
    allowed, told, _ = rank_report(sup, make_spec, h, cpus=(ALLOWED[0],))
    assert allowed == str(ALLOWED[0])
    assert told == str(ALLOWED[0])


@needs_two
def test_union_of_sockets_when_gpus_span_them(sup, make_spec, h):
    allowed, told, _ = rank_report(sup, make_spec, h, cpus=(ALLOWED[0], ALLOWED[1]))
    expected = f"{ALLOWED[0]}-{ALLOWED[1]}" if ALLOWED[1] == ALLOWED[0] + 1 else f"{ALLOWED[0]},{ALLOWED[1]}"
    assert allowed == told == expected


def test_without_cpus_the_rank_keeps_every_cpu(sup, make_spec, h):
    allowed, told, _ = rank_report(sup, make_spec, h)
    assert allowed == told
    assert sorted(int(x) for part in told.split(",") for x in _expand(part)) == ALLOWED


def test_cpus_that_do_not_exist_here_leave_the_rank_unpinned_and_say_so(sup, make_spec, h):
    allowed, told, log = rank_report(sup, make_spec, h, cpus=(4000, 4001))
    assert allowed == told
    assert "[labgang] not pinned: CPUs 4000-4001 of its GPUs' NUMA node are not available here" in log


def _expand(part: str) -> list[int]:
    lo, _, hi = part.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def test_cpus_are_validated_and_serialised_only_when_set(make_spec):
    spec = make_spec(["true"], cpus=[3, 1])
    assert spec.cpus == (3, 1) and spec.to_dict()["cpus"] == [3, 1]
    assert LaunchSpec.from_dict(spec.to_dict()) == spec
    assert "cpus" not in make_spec(["true"]).to_dict()
    with pytest.raises(InvalidSpec, match="cpus"):
        make_spec(["true"], cpus=[-1])


def test_torchrun_variables_make_each_rank_one_torchrun_node(make_spec):
    spec = make_spec(["torchrun", "train.py"], rank=1, world_size=2, devices=("GPU-a", "GPU-b", "GPU-c", "GPU-d"))
    env = contract_variables(spec)
    assert {k: v for k, v in env.items() if k.startswith("PET_")} == {
        "PET_NNODES": "2",
        "PET_NODE_RANK": "1",
        "PET_NPROC_PER_NODE": "4",
        "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": "29400",
        "PET_RDZV_ID": "job1",
    }
