"""How long a reclaim of borrowed devices would take, and who may take them back: the client-side
reading of the coordinator's reclaim rules that the *borrowed at risk* finding and the TUI use."""

from __future__ import annotations

from collections.abc import Iterable

from labgang.launcher.pitfalls.views import JobView, QueueView


def reclaim_time_s(queue: QueueView, jobs: Iterable[JobView]) -> float | None:
    """Seconds a reclaim of ``queue``'s borrowed devices would take: the sum of the victims' grace.

    Uses the coordinator's ``reclaim_time_s`` when given. Otherwise it picks victims the way
    the scheduler does (lowest priority first, most recently admitted first) among the
    queue's device-holding jobs until they cover what it borrowed, and adds their ``grace_s``;
    None when a needed victim's grace is unknown.
    """
    if queue.reclaim_time_s is not None:
        return queue.reclaim_time_s
    borrowed = sum(queue.borrowed.values())
    if borrowed <= 0:
        return 0.0
    mine = sorted(
        (j for j in jobs if j.queue == queue.name and j.holds_devices),
        key=lambda j: (j.priority, -(j.admit_time or 0.0), j.id),
    )
    covered, total = 0, 0.0
    for job in mine:
        if covered >= borrowed:
            break
        if job.grace_s is None:
            return None
        covered += job.total_devices
        total += job.grace_s
    return total


def _preemptor_priority(queue: QueueView, jobs: Iterable[JobView]) -> int:
    """The priority a job of ``queue`` that takes capacity back would likely have: the highest
    among its unfinished jobs in the snapshot (pending ones first), else 0, the priority of a
    plain submission."""
    mine = [j for j in jobs if j.queue == queue.name and not j.finished]
    pending = [j.priority for j in mine if j.state == "pending"]
    if pending:
        return max(pending)
    return max((j.priority for j in mine), default=0)


def can_take_back(other: QueueView, borrower: QueueView, jobs: Iterable[JobView]) -> bool:
    """Whether ``other`` (a queue of ``borrower``'s cohort) could preempt ``borrower``'s jobs.

    True when its ``reclaim_within_cohort`` is ``any``; or ``lower-priority`` and one of
    the borrower's device-holding jobs has a lower priority than ``other``'s likely
    preemptor (:func:`_preemptor_priority`); or its ``borrow_within_cohort`` policy is
    ``lower-priority`` and such a job also has a priority at or below its
    ``max_priority_threshold``. A queue whose policies the coordinator does not send
    (older coordinator: both None) counts as able to, as it may be.
    """
    jobs = tuple(jobs)
    if other.reclaim_within_cohort is None and other.borrow_policy is None:
        return True
    if other.reclaim_within_cohort == "any":
        return True
    holding = [j.priority for j in jobs if j.queue == borrower.name and j.holds_devices]
    lowest = min(holding, default=None)
    if lowest is None:
        return other.reclaim_within_cohort == "lower-priority" or other.borrow_policy == "lower-priority"
    preemptor = _preemptor_priority(other, jobs)
    if other.reclaim_within_cohort == "lower-priority" and lowest < preemptor:
        return True
    threshold = other.borrow_max_priority_threshold
    return other.borrow_policy == "lower-priority" and lowest < preemptor and (threshold is None or lowest <= threshold)
