"""``JobRequest``'s derived values are worked out once, at construction (``replace`` builds a new
request, and they are worked out again for it): over random requests (elastic gangs, host
resources, shares, jobs of groups), ``total``, ``host``, ``elastic`` and ``shared`` equal their
definitions, and the hash equals the hash of the compared fields' tuple (what a frozen dataclass
generated), so equal requests hash alike and sets and dicts of requests are what they were."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.model import GroupRequest, JobRequest


def _random_request(rng: random.Random, groups: bool = True) -> JobRequest:
    if groups and rng.random() < 0.2:
        parts = tuple(GroupRequest(f"g{k}", _random_request(rng, groups=False)) for k in range(rng.randint(2, 3)))
        return JobRequest(workers=sum(g.request.workers for g in parts), groups=parts)
    workers = rng.randint(1, 4)
    return JobRequest(
        workers=workers,
        per_worker=rng.choice([1, 2, 8]),
        min_workers=rng.choice([None, None, 1, workers]),
        cpus_per_task=rng.choice([0, 0, 4]),
        mem=rng.choice([0, 0, 1 << 30]),
        exclusive=rng.random() < 0.1,
        shards=rng.choice([0, 0, 0, 2]),
        gpu_model=rng.choice([None, "h100"]),
        nodes=rng.choice([None, 1]),
        topology=rng.choice([None, "nvlink"]),
        gpu_mem=rng.choice([0, 1 << 34]),
        mem_per_gpu=rng.choice([0, 0, 1 << 20]),
    )


def _compared(r: JobRequest) -> tuple[object, ...]:
    return tuple(getattr(r, f.name) for f in dataclasses.fields(r) if f.compare)


def test_derived_values_and_hash_equal_their_definitions() -> None:
    rng = random.Random(2)
    seen: dict[JobRequest, JobRequest] = {}
    for _ in range(2000):
        r = _random_request(rng)
        if rng.random() < 0.3:  # a replaced request works its values out again
            r = dataclasses.replace(r, workers=r.workers + 1, min_workers=None)
        if r.groups:
            assert r.total == sum(g.request.workers * g.request.per_worker for g in r.groups)
            assert r.host == any(g.request.host for g in r.groups)
            assert r.elastic == any(g.request.elastic for g in r.groups)
        else:
            assert r.total == r.workers * r.per_worker
            assert r.host == bool(r.cpus_per_task or r.mem or r.mem_per_gpu or r.exclusive)
            assert r.elastic == (r.min_workers is not None and r.min_workers < r.workers)
        assert r.shared == bool(r.shards or r.mps)
        assert hash(r) == hash(_compared(r))
        twin = seen.setdefault(r, r)
        assert twin == r and hash(twin) == hash(r)
    assert len(seen) < 2000  # equal requests met: found as one key
