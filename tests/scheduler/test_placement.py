"""Gang placement: fullest node, fewest nodes, exact node counts, models, MIG, locality groups."""

import pytest
from labgang.launcher.scheduler import run_cycle
from sched_builders import Cluster, job, queue

Q = queue("q").nominal(gpu=64, mig_1g_10gb=16, mig_3g_40gb=8).build()


def admit_one(cluster: Cluster, builder) -> dict[str, list[str]] | None:
    """Run one cycle for one pending job; return {node: [devices]} of its placement or None."""
    result = run_cycle(cluster.snapshot([Q], [builder.queue("q")]))
    if not result.admitted:
        return None
    out: dict[str, list[str]] = {}
    for rp in result.admitted[0].placement:
        out.setdefault(rp.node, []).extend(rp.devices)
    return out


@pytest.mark.parametrize(
    "busy,need,want_node",
    [
        pytest.param({}, 1, "n1", id="tie-goes-to-node-order"),
        pytest.param({"n2": 3}, 1, "n2", id="fullest-node-that-holds-it"),
        pytest.param({"n1": 3, "n2": 2}, 2, "n2", id="skips-node-too-full"),
    ],
)
def test_small_job_goes_to_fullest_node_that_holds_it(busy, need, want_node):
    # each node has its own model so the fillers land exactly where the test says
    c = Cluster()
    for name in ("n1", "n2", "n3"):
        c.node(name, 4, model=name)
    for name, n in busy.items():
        for i in range(n):
            c.run(job(f"{name}-{i}").queue("q").gpus(1).model(name))
    got = admit_one(c, job("x").gpus(need))
    assert list(got) == [want_node]


def test_gang_spreads_over_fewest_nodes_remainder_on_fullest():
    c = Cluster().node("n1", 4).node("n2", 8).node("n3", 2)
    got = admit_one(c, job("g").gang(5, 2))
    assert {n: len(d) for n, d in got.items()} == {"n2": 8, "n3": 2}


def test_ranks_on_one_node_are_consecutive_and_numbered():
    c = Cluster().node("n1", 4).node("n2", 4)
    result = run_cycle(c.snapshot([Q], [job("g").queue("q").gang(8, 1)]))
    ranks = result.admitted[0].placement
    assert [r.rank for r in ranks] == list(range(8))
    assert [r.node for r in ranks] == ["n1"] * 4 + ["n2"] * 4


def test_exact_node_count_spreads_evenly():
    c = Cluster().node("n1", 8).node("n2", 8).node("n3", 8)
    got = admit_one(c, job("g").gang(4, 1).nodes(2))
    assert sorted(len(d) for d in got.values()) == [2, 2]


def test_exact_node_count_that_cannot_be_met_is_unschedulable():
    c = Cluster().node("n1", 8)
    result = run_cycle(c.snapshot([Q], [job("g").queue("q").gang(4, 1).nodes(2)]))
    assert result.pending[0].reason.code.value == "unschedulable"


def test_model_constraint_is_case_insensitive_substring():
    c = Cluster().node("a", 4, model="NVIDIA A100-SXM4-80GB").node("h", 4, model="NVIDIA H100 80GB HBM3")
    assert list(admit_one(c, job("x").gpus(2).model("h100"))) == ["h"]
    assert list(admit_one(c, job("x").gpus(2).model("A100"))) == ["a"]


def test_mig_request_takes_one_device_of_its_profile_per_rank():
    c = Cluster().mig_node("m", 2, ["3g.40gb", "1g.10gb", "1g.10gb"]).node("f", 2)
    got = admit_one(c, job("x").mig("1g.10gb", workers=3))
    assert list(got) == ["m"] and len(got["m"]) == 3
    assert all(d.startswith("MIG-m-") for d in got["m"])


def test_full_gpu_request_never_lands_on_a_mig_device():
    c = Cluster().mig_node("m", 8, ["7g.80gb"])
    result = run_cycle(c.snapshot([Q], [job("x").queue("q").gpus(1)]))
    assert not result.admitted
    assert result.pending[0].reason.code.value == "unschedulable"


def test_rank_prefers_devices_of_one_group():
    # n1: GPUs 0-3 in g0, 4-7 in g1; GPUs 0,1 and 4 busy -> a 2-GPU rank fits g0 (2,3) exactly
    c = Cluster().node("n1", 8, groups=2)
    c.run(job("b1").queue("q").gpus(2))  # takes 0,1 (g0 best fit is the smallest group holding it: both 4)
    c.run(job("b2").queue("q").gpus(1))  # takes 2 (g0 has 2 left, the smaller group)
    got = admit_one(c, job("x").gpus(2))
    # g0 has 1 free (GPU 3), g1 has 4: the rank stays inside g1
    assert got == {"n1": ["GPU-n1-4", "GPU-n1-5"]}


def test_unavailable_devices_are_not_offered():
    c = Cluster().node("n1", 2)
    c.unavailable = {"GPU-n1-0"}
    assert admit_one(c, job("x").gpus(1)) == {"n1": ["GPU-n1-1"]}
    assert admit_one(c, job("y").gpus(2)) is None
