"""``capacity.identity_delta`` (the running jobs gone and new between two snapshots, by object
identity, which the scheduler's per-cycle memos share): over random pairs of running-job maps
(jobs kept, dropped, added, a map compared with itself or with an empty one), the answer equals
the plain comprehension over both maps, asked first and asked again (the memo's hit)."""

from __future__ import annotations

import random

from labgang.launcher.scheduler.capacity import identity_delta, running_by_identity
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob
from sched_builders import job


def test_gone_and_new_equal_the_plain_comprehension_over_random_pairs() -> None:
    rng = random.Random(5)
    views = [job(f"j{k}").running((RankPlacement(0, "n0", (f"GPU-{k}",)),), k) for k in range(300)]
    maps: list[dict[int, RunningJob]] = [{}]
    for step in range(400):
        kept = [j for j in maps[-1].values() if rng.random() < 0.95]
        fresh = rng.sample(views, rng.randrange(0, 6))
        maps.append(running_by_identity(tuple(dict.fromkeys(kept + fresh))))
        after = maps[-1]
        for before in (maps[-2], rng.choice(maps), after, {}):
            want = ({i for i in before if i not in after}, {i for i in after if i not in before})
            assert identity_delta(before, after) == want, f"step {step}"
            assert identity_delta(before, after) == want, f"step {step} (asked again)"
