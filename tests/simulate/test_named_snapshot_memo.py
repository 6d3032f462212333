"""``JobIds.named_snapshot`` (the scheduler's snapshot with jobs named as the scenario file
names them) remembers the named views by the driver's view objects and the last running tuple:
over a random sequence of snapshots (jobs coming and going, views rebuilt as new equal objects,
the very same running tuple handed again, a view listed twice, pending jobs waiting unchanged
or changing their nominated victims, an id with no name), every snapshot equals the one named
view by view from scratch (no memo: a fresh ``JobIds``)."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.scheduler.snapshot import PendingJob, RankPlacement, RunningJob, Snapshot
from labgang.launcher.simulate.naming import JobIds
from sched_builders import Cluster, job


def _named_afresh(ids: JobIds, snap: Snapshot) -> Snapshot:
    """The reference: every view named anew (no memo, whatever ``ids`` remembers)."""

    def name(model_id: str) -> str:
        return ids.model_names.get(model_id, model_id)

    return dataclasses.replace(
        snap,
        running=tuple(dataclasses.replace(j, id=name(j.id)) for j in snap.running),
        pending=tuple(
            dataclasses.replace(p, id=name(p.id), nominated=tuple(name(v) for v in p.nominated)) for p in snap.pending
        ),
    )


def test_named_snapshots_equal_the_view_by_view_naming_over_a_random_sequence() -> None:
    rng = random.Random(7)
    cluster = Cluster()
    cluster.node("n0", 8)
    nodes = tuple(cluster.nodes)
    ids = JobIds()
    # model ids are numbers; names are the file's (a scenario may name a job "3" too, which is
    # another job's number: naming twice would show up); jobs 0 and 400 on have no
    # name (they stay as they are)
    ids.model_names = {str(k): (f"train{k}" if k % 7 else str(k + 1)) for k in range(1, 400)}
    template = job("t").running((RankPlacement(0, "n0", ("GPU-x",)),), 0)
    live: list[RunningJob] = []
    waiting: dict[str, PendingJob] = {}
    last_running: tuple[RunningJob, ...] = ()
    hits = dict.fromkeys(["same tuple", "rebuilt", "duplicate", "nominated", "unnamed"], 0)
    for step in range(600):
        roll = rng.random()
        if roll < 0.1:  # nothing running changed: the driver hands the very tuple again
            running = last_running
            hits["same tuple"] += 1
        else:
            if roll < 0.45:
                k = str(rng.randrange(0, 430))
                live.append(dataclasses.replace(template, id=k, seq=step))
                hits["unnamed"] += k not in ids.model_names
            elif roll < 0.75 and live:
                live.pop(rng.randrange(len(live)))
            elif live:  # a view built anew: an equal, new object
                i = rng.randrange(len(live))
                live[i] = dataclasses.replace(live[i], terminating=rng.random() < 0.5)
                hits["rebuilt"] += 1
            running_list = list(live)
            if running_list and rng.random() < 0.05:  # the same view listed twice
                running_list.insert(rng.randrange(len(running_list)), rng.choice(running_list))
                hits["duplicate"] += 1
            running = tuple(running_list)
        last_running = running
        for _ in range(rng.randrange(3)):
            k = str(rng.randrange(1, 400))
            waiting[k] = job(k).pending(step)
        if waiting and rng.random() < 0.3:
            k = rng.choice(list(waiting))
            victims = tuple(j.id for j in rng.sample(live, min(2, len(live))))
            waiting[k] = dataclasses.replace(waiting[k], nominated=victims)  # a new view, not equal
            hits["nominated"] += bool(victims)
        if waiting and rng.random() < 0.3:
            del waiting[rng.choice(list(waiting))]
        snap = Snapshot(now=float(step), nodes=nodes, queues=(), running=running, pending=tuple(waiting.values()))
        got = ids.named_snapshot(snap)
        assert got == _named_afresh(ids, snap), f"step {step}"
        assert got == JobIds(model_names=ids.model_names).named_snapshot(snap), f"step {step}"
    assert all(hits.values()), hits
