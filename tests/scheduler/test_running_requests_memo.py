"""A cycle's device book gathers the running jobs' requests from a memo on the previous snapshot
(``capacity._running_requests``): over a random sequence of snapshots (jobs coming and going,
``--exclusive`` ones among them, views rebuilt as new equal objects, a job listed twice, a pending
job with a running job's id, pending ``--exclusive`` jobs), every book's requests and whether an
``--exclusive`` job is known equal the book built with the memo off, the map read at once or only
after the next snapshot's book was built (it is built when first read)."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import capacity
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
from sched_builders import Cluster, job


def test_requests_equal_the_gathering_anew_over_a_random_sequence() -> None:
    rng = random.Random(13)
    cluster = Cluster()
    cluster.node("n0", 8)
    nodes = tuple(cluster.nodes)
    template = job("t").running((RankPlacement(0, "n0", ("GPU-x",)),), 0)
    kinds = [JobRequest(per_worker=1), JobRequest(workers=2, per_worker=2), JobRequest(exclusive=True)]
    live: list[RunningJob] = []
    hits = dict.fromkeys(["memo", "duplicate", "rebuilt", "exclusive", "pending shares an id"], 0)
    earlier: tuple[DeviceBook, DeviceBook, dict[str, JobRequest]] | None = None
    for step in range(600):
        roll = rng.random()
        if roll < 0.45:
            request = rng.choices(kinds, [10, 5, 1])[0]
            live.append(dataclasses.replace(template, id=f"j{step}", request=request, seq=step))
        elif roll < 0.8 and live:
            live.pop(rng.randrange(len(live)))
        elif live:  # a view built anew: an equal, new object (now and then with another request)
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i], request=rng.choice(kinds))
            hits["rebuilt"] += 1
        running = list(live)
        if running and rng.random() < 0.05:  # the same job listed twice
            running.insert(rng.randrange(len(running)), dataclasses.replace(rng.choice(running)))
            hits["duplicate"] += 1
        pending = [job(f"p{step}_{k}").pending(k) for k in range(rng.randrange(3))]
        if rng.random() < 0.1:
            pending.append(dataclasses.replace(job("px").pending(9), request=JobRequest(exclusive=True)))
        if running and rng.random() < 0.05:
            pending.append(dataclasses.replace(job(rng.choice(running).id).pending(8), request=rng.choice(kinds)))
            hits["pending shares an id"] += 1
        snap = Snapshot(now=float(step), nodes=nodes, queues=(), running=tuple(running), pending=tuple(pending))
        kept, capacity.memo_requests = capacity._last_requests, False  # the reference must not reset the memo
        try:
            reference = DeviceBook(snap)
        finally:
            capacity._last_requests, capacity.memo_requests = kept, True
        # the map as documented, gathered here: pending jobs, then running ones (a running job wins)
        expected = {p.id: p.request for p in pending} | {r.id: r.request for r in running}
        got = DeviceBook(snap)
        hits["memo"] += capacity._last_requests is not None
        hits["exclusive"] += reference.exclusive_known
        assert got.exclusive_known == reference.exclusive_known, f"step {step}"
        if step % 2:  # the map read at once (built when first read: DeviceBook.requests)
            assert got.requests == reference.requests == expected, f"step {step}"
        if earlier is not None:  # the last step's maps, first read only after this step's books were built
            assert earlier[0].requests == earlier[1].requests == earlier[2], f"step {step - 1}, read late"
        earlier = (got, reference, expected) if step % 2 == 0 else None
        assert got.exclusive_known == reference.exclusive_known, f"step {step}"
    assert all(hits.values()), hits
