"""``--target`` for ``labgang plan replay``: what the waits must be, and the search for the
smallest added capacity that meets every target.

A target is ``[QUEUE:]METRIC<=DURATION`` with METRIC one of ``p50-wait``, ``p90-wait``,
``max-wait`` and DURATION as ``--time`` takes it (``90``, ``30m``, ``1h``, ``1h30m``):
``p90-wait<=1h`` is about every job of the period together, ``vision:p90-wait<=30m`` about
queue ``vision``'s jobs.

The search adds whole nodes of ``--node-gpus`` GPUs: it doubles the added nodes (0, 1, 2, 4,
... up to ``--max-add-nodes``) until every target holds, then bisects between the last count
that failed and the first that held. Waits do not always fall as capacity grows (a different
admission order can move a gang), so the answer is the smallest count found this way, replayed
and shown with its table: the figures printed are the proof, not an estimate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labgang.launcher.durations import DURATION_HELP, format_duration, parse_duration
from labgang.launcher.plan.replay import ALL, Replay, cause_of

METRICS = {"p50-wait": "wait_p50_s", "p90-wait": "wait_p90_s", "max-wait": "wait_max_s"}
TARGET_HELP = (
    "[QUEUE:]METRIC<=DURATION, METRIC one of p50-wait, p90-wait, max-wait; e.g. p90-wait<=1h, vision:p90-wait<=30m"
)
_TARGET = re.compile(r"^(?:(?P<queue>[^:<=]+):)?(?P<metric>[a-z0-9-]+)\s*<=\s*(?P<limit>\S+)$")


@dataclass(frozen=True)
class Target:
    """One target: ``queue``'s (``"(all)"``: every job's) ``metric`` at most ``limit_s`` seconds."""

    queue: str
    metric: str
    limit_s: float
    text: str

    def value(self, result: Replay) -> float | None:
        """The figure in ``result`` (None: the queue has no started job there)."""
        fig = result.figures(self.queue)
        return None if fig is None else getattr(fig, METRICS[self.metric])

    def met(self, result: Replay) -> bool:
        """True when the figure is at most the limit (a queue with jobs none of which started fails)."""
        value = self.value(result)
        return value is not None and value <= self.limit_s

    def shown(self, result: Replay) -> str:
        """``vision p90 wait 41m (target <= 30m)``."""
        value = self.value(result)
        where = "all jobs" if self.queue == ALL else self.queue
        figure = "no job started" if value is None else format_duration(value)
        return f"{where} {self.metric.replace('-', ' ')} {figure} (target <= {format_duration(self.limit_s)})"


def parse_target(text: str, queues: list[str]) -> Target:
    """Parse one ``--target`` value.

    Args:
        queues: the queues of the replay (a target may only name one of them).

    Raises:
        ValueError: one line naming the part at fault and what is allowed.
    """
    m = _TARGET.match(text.strip())
    if m is None:
        raise ValueError(f"--target: {text!r} does not parse; allowed: {TARGET_HELP}")
    metric = m.group("metric")
    if metric not in METRICS:
        raise ValueError(f"--target: {metric!r} is not a metric; allowed: {', '.join(METRICS)}")
    try:
        limit = parse_duration(m.group("limit"))
    except ValueError:
        raise ValueError(f"--target: {m.group('limit')!r} is not a duration; allowed: {DURATION_HELP}") from None
    queue = m.group("queue")
    if queue is not None and queue not in queues:
        raise ValueError(f"--target: no queue {queue!r} in the replay; allowed: {', '.join(queues)}")
    return Target(queue or ALL, metric, limit, text.strip())


@dataclass
class Search:
    """The outcome of :func:`search`.

    Attributes:
        added: nodes added in the answer (None: no count tried met every target).
        result: the replay of the answer, or of the best count tried when none met.
        tried: added node count -> whether every target held, in the order tried.
        best_added: the count whose replay came closest (fewest targets missed, then the
            smallest total excess over the limits), reported when none met.
    """

    added: int | None
    result: Replay
    tried: dict[int, bool]
    best_added: int


def _shortfall(targets: list[Target], result: Replay) -> tuple[int, float]:
    missed = [t for t in targets if not t.met(result)]
    excess = sum((t.value(result) or float("inf")) - t.limit_s for t in missed)
    return len(missed), excess


def search(targets: list[Target], run: Callable[[int], Replay], max_added: int) -> Search:
    """The smallest number of added nodes (0..``max_added``) whose replay meets every target.

    Args:
        run: replays the history with that many nodes added.
    """
    results: dict[int, Replay] = {}
    tried: dict[int, bool] = {}

    def ok(n: int) -> bool:
        if n not in results:
            results[n] = run(n)
            tried[n] = all(t.met(results[n]) for t in targets)
        return tried[n]

    low, high = -1, None  # low: a count known to fail; high: one known to meet
    n = 0
    while n <= max_added:
        if ok(n):
            high = n
            break
        low = n
        if n == max_added:
            break
        n = min(max_added, max(1, n * 2))
    if high is None:
        best = min(results, key=lambda k: (*_shortfall(targets, results[k]), k))
        return Search(None, results[best], tried, best)
    while high - low > 1:
        mid = (low + high) // 2
        if ok(mid):
            high = mid
        else:
            low = mid
    return Search(high, results[high], tried, high)


QUOTA_BOUND_SHARE = 0.99
"""A queue whose tail waited at least this share of its waiting on quota is limited by quota."""


def quota_bound(
    target: Target, result: Replay, queues: Sequence[Mapping[str, Any]], quota_to: str | None
) -> str | None:
    """Why added nodes cannot meet ``target`` in ``result`` (the replay with none added), in words,
    or None when they may: the target is a queue's, unmet, its tail's waiting is all quota
    (:data:`QUOTA_BOUND_SHARE`; ``over_quota``, ``cohort_exhausted``), and the added nodes' quota
    (``--quota-to``, ``quota_to``) goes neither to that queue nor to a queue of its cohort (from
    which it could borrow).

    Args:
        queues: the replay's ``[[queues]]`` tables (``name``, ``cohort``).
        quota_to: the queue whose nominal quota the added GPUs raise (None: none).
    """
    if target.queue == ALL or target.met(result):
        return None
    fig = result.figures(target.queue)
    limit = None if fig is None else fig.main_limit()
    if limit is None or limit[0] != "quota" or limit[1] < QUOTA_BOUND_SHARE:
        return None
    cohort = {str(q.get("name")): q.get("cohort") for q in queues}
    mine = cohort.get(target.queue)
    if quota_to == target.queue or (mine is not None and quota_to is not None and cohort.get(quota_to) == mine):
        return None
    gets = "no queue's" if quota_to is None else f"queue {quota_to!r}'s (--quota-to)"
    return (
        f"{target.queue}'s waits come from quota ({limit[1]:.0%} of its tail's waiting), not capacity: added nodes "
        f"raise {gets} nominal quota, not {target.queue}'s, so they cannot meet {target.text!r}; "
        f"{target.queue}'s nominal quota (or its borrowing) is what limits it ({target.shown(result)})"
    )


UNMOVED = {
    "quota": "its queue's nominal quota, which added nodes raise only with --quota-to",
    "other": "what added nodes do not shorten (dependencies, array caps, holds, begin times, user limits)",
}
"""The causes of a wait (:data:`~labgang.launcher.plan.replay.CAUSES`) more capacity does not shorten by
itself, in words."""


def unmet_because(target: Target, result: Replay) -> str | None:
    """For a ``target`` unmet in ``result`` (a search's best replay): what its tail mostly waited
    for, where that is a cause added nodes do not shorten (:data:`UNMOVED`), with the pending
    reasons' times (``"nlp's p90 tail waited 96% for what added nodes do not shorten (...):
    dependency 3h, array_limit 1h"``); None when the target is met or its tail waited mostly for
    room (capacity, fragmentation, a reservation)."""
    if target.met(result):
        return None
    fig = result.figures(target.queue)
    limit = None if fig is None else fig.main_limit()
    if fig is None or limit is None or limit[0] not in UNMOVED:
        return None
    codes = ", ".join(
        f"{code} {format_duration(seconds)}"
        for code, seconds in sorted(fig.reasons.items(), key=lambda kv: -kv[1])
        if cause_of(code) == limit[0]
    )
    who = "every job's" if target.queue == ALL else f"{target.queue}'s"
    return f"{who} p90 tail waited {limit[1]:.0%} for {UNMOVED[limit[0]]}: {codes}"
