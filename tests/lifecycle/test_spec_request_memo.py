"""``JobSpec.request`` (the scheduler's view of a job's request, asked for by every pending job's
view every cycle) is remembered with the very field values it was made from: over a random
sequence of in-place writes to the spec (a field it is made of set to a new value, to an equal
value, or to the same object again, and fields it is not made of), every answer equals a request
built anew from the spec as it is then, and the remembered one is handed out while nothing it is
made of was written."""

from __future__ import annotations

import random

from labgang.launcher.lifecycle.records import JobSpec

_CHOICES: dict[str, list[object]] = {
    "workers": [1, 2, 4],
    "per_worker": [0, 1, 2, 8],
    "resource": ["gpu", "mig-1g.10gb"],
    "gpu_model": [None, "h100", "a100"],
    "nodes": [None, ("n0",), ("n0", "n1")],
    "topology": [None, "numa", "nvlink"],
    "min_workers": [None, 1, 2],
    "cpus_per_task": [None, 2, 8],
    "mem": [None, 1 << 30, 2 << 30],
    "mem_per_gpu": [None, 1 << 30],
    "exclusive": [False, True],
    "shards": [None, 2, 4],
    "mps": [None, 50],
    "gpu_mem": [None, 10 << 30],
    # not part of the request
    "priority": [0, 10],
    "queue": ["a", "b"],
}


def test_the_request_equals_one_built_anew_over_random_writes() -> None:
    rng = random.Random(3)
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="a", priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0,
        time_limit_s=None, requeue=True, signal=None,
    )  # fmt: skip
    last = spec.request
    hits = dict.fromkeys(["kept", "changed", "same value written"], 0)
    for step in range(2000):
        name = rng.choice(list(_CHOICES))
        before = getattr(spec, name)
        value = rng.choice(_CHOICES[name])
        if rng.random() < 0.5:  # an equal value, another object
            if isinstance(value, tuple):
                value = tuple(list(value))
            elif isinstance(value, int) and value > 1000:
                value = int(str(value))
        setattr(spec, name, value)
        got = spec.request
        assert got == spec._one_request(), f"step {step}: {name}={value!r}"
        if value is before or name in ("priority", "queue"):
            assert got is last, f"step {step}: rebuilt though nothing it is made of was written"
            hits["kept"] += 1
        elif value == before:
            hits["same value written"] += 1
        else:
            hits["changed"] += 1
        last = got
    assert all(hits.values()), hits
