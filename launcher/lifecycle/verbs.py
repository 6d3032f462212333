"""scontrol's verbs on one job: ``hold``, ``release``, ``requeue`` and ``update`` — who may do
what to a job in which state, and what an update changes.

Each ``*_refusal`` function answers "may ``who`` do this to ``job`` now?" with None (yes) or a
:class:`Refusal` (one sentence naming the job, its state and what would be allowed). The driver
asks before it hands the lifecycle model the event, so a refused request changes nothing; the
model (``machine.py``) applies an allowed one. Ownership (owner or admin, as ``cancel``) is the
driver's check (``Caller.check_may_act``); these are the rules beyond it:

* ``hold``: a pending job (Slurm: held jobs are pending). An admin holding another user's job
  makes an *admin hold*, which only an admin releases (Slurm's JobHeldAdmin).
* ``release``: a held job.
* ``requeue``: an admitted or running job (stopped with its grace, then pending again as a new
  attempt, restart + 1, as ``scontrol requeue``); ``--hold`` also holds it (``requeuehold``).
* ``update``: ``priority`` (admins any value; others may only lower it), ``time_limit_s`` (admins
  any; others may only lower it), ``name``, ``dependency`` (only while pending; ``""`` clears it)
  and ``queue`` (Slurm's ``Partition=``: only while pending, and not a share of a GPU; whether the
  caller may use the queue and the job could start there is the driver's check).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from labgang.launcher.lifecycle.dependency import BadDependency, parse_dependency
from labgang.launcher.lifecycle.records import JobRecord, JobSpec
from labgang.launcher.lifecycle.states import JobState, state_phrase


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a verb is refused: ``message`` (one sentence), the request ``field`` at fault (or None),
    and ``kind``: ``"state"`` (well formed, but the job's state refuses it: HTTP 409),
    ``"forbidden"`` (a value this caller may not set: 403) or ``"invalid"`` (a malformed value: 400)."""

    message: str
    field: str | None = None
    kind: str = "state"


@dataclass(frozen=True, slots=True)
class JobUpdate:
    """What ``labgang update`` changes; a None field is left as it is.

    Attributes:
        priority: the new priority (integer). time_limit_s: the new time limit, seconds (> 0).
        name: the new job name. dependency: the new ``--dependency`` text, ``""`` to remove it.
        no_time_limit: remove the time limit (``TimeLimit=UNLIMITED`` or ``0``, as Slurm; only an
        admin may lift a limit).
    """

    priority: int | None = None
    time_limit_s: float | None = None
    name: str | None = None
    dependency: str | None = None
    no_time_limit: bool = False
    queue: str | None = None

    def changes(self, spec: JobSpec) -> dict[str, object]:
        """The fields whose value differs from ``spec``'s, by ``JobSpec`` field name."""
        out: dict[str, object] = {}
        if self.priority is not None and self.priority != spec.priority:
            out["priority"] = self.priority
        if self.time_limit_s is not None and self.time_limit_s != spec.time_limit_s:
            out["time_limit_s"] = self.time_limit_s
        elif self.no_time_limit and spec.time_limit_s is not None:
            out["time_limit_s"] = None
        if self.name is not None and self.name != spec.name:
            out["name"] = self.name
        if self.dependency is not None and (self.dependency or None) != spec.dependency:
            out["dependency"] = self.dependency or None
        if self.queue is not None and self.queue != spec.queue:
            out["queue"] = self.queue
        return out

    def applied(self, spec: JobSpec) -> JobSpec:
        """A new spec with the changes (the old object is left as it is: caches compare by identity).

        Raises:
            BadDependency: ``dependency`` does not parse (checked first by :func:`update_refusal`).
        """
        changes = self.changes(spec)
        dep = changes.get("dependency")
        if isinstance(dep, str):
            changes["dependency"] = parse_dependency(dep).text
        return replace(spec, **changes)  # type: ignore[arg-type]


def hold_refusal(job: JobRecord) -> Refusal | None:
    """May ``job`` be held? Only a pending one (a running job: ``requeue --hold``)."""
    st = job.status
    if st.state != JobState.PENDING:
        hint = "; `labgang requeue --hold` stops it and holds it" if st.state.holds_devices else ""
        return Refusal(f"job {job.id} {state_phrase(st.state)}: only a pending job can be held{hint}")
    return None


def release_refusal(job: JobRecord, admin: bool) -> Refusal | None:
    """May ``job`` be released by a caller (``admin`` or not)? Only a held job; an admin hold
    only by an admin."""
    st = job.status
    if st.hold is None:
        return Refusal(f"job {job.id} {state_phrase(st.state)} and is not held: nothing to release")
    if st.hold_admin and not admin:
        return Refusal(f"job {job.id} was held by the admin {st.hold}; only an admin may release it", kind="forbidden")
    return None


def requeue_refusal(job: JobRecord) -> Refusal | None:
    """May ``job`` be requeued? Only an admitted or running one (a finished job never runs again,
    docs/queue-semantics.md §A3.6; a terminating one is already stopping)."""
    st = job.status
    if st.state not in (JobState.ADMITTED, JobState.RUNNING):
        why = {
            JobState.PENDING: "it is already pending",
            JobState.TERMINATING: "it is already stopping",
        }.get(st.state, "a finished job never runs again")
        return Refusal(
            f"job {job.id} {state_phrase(st.state)}: only an admitted or running job can be requeued ({why})"
        )
    return None


def update_refusal(job: JobRecord, update: JobUpdate, admin: bool) -> Refusal | None:
    """May ``update`` be applied to ``job`` by a caller (``admin`` or not)?

    Refused: any change to a finished job; a higher priority or a longer time limit from a
    non-admin (a first limit on an unlimited job shortens it: anyone may set one); a dependency
    or queue change once the job left pending; a queue change of a share of a GPU; a dependency
    that does not parse or names the job itself; an empty name; a time limit not above 0; a
    limit lifted (``no_time_limit``) by a non-admin.
    """
    spec, st = job.spec, job.status
    if st.state.finished:
        return Refusal(f"job {job.id} {state_phrase(st.state)}: a finished job cannot be updated")
    if update.priority is not None and not admin and update.priority > spec.priority:
        return Refusal(
            f"priority {update.priority} is above job {job.id}'s {spec.priority}: only an admin may raise it "
            f"(you may lower it: priority <= {spec.priority}; as with Slurm's Nice, a lowered job stays lowered)",
            field="priority",
            kind="forbidden",
        )
    if update.time_limit_s is not None:
        if update.time_limit_s <= 0:
            return Refusal("time_limit_s: must be > 0 seconds", field="time_limit_s", kind="invalid")
        limit = spec.time_limit_s
        if not admin and limit is not None and update.time_limit_s > limit:  # a first limit only shortens
            return Refusal(
                f"time limit {update.time_limit_s:g} s would raise job {job.id}'s current limit of {limit:g} s: "
                f"only an admin may extend a time limit (you may shorten it: at most {limit:g} s)",
                field="time_limit_s",
                kind="forbidden",
            )
    if update.no_time_limit and not admin and spec.time_limit_s is not None:
        return Refusal(
            f"time limit UNLIMITED would lift job {job.id}'s current limit of {spec.time_limit_s:g} s: only an "
            f"admin may lift a time limit (you may shorten it: at most {spec.time_limit_s:g} s)",
            field="time_limit_s",
            kind="forbidden",
        )
    if update.name is not None and not update.name.strip():
        return Refusal("name: must not be empty", field="name", kind="invalid")
    if update.queue is not None and update.queue != spec.queue:
        if st.state != JobState.PENDING:
            return Refusal(
                f"job {job.id} {state_phrase(st.state)}: its queue can only be changed while the job is pending",
                field="queue",
            )
        if spec.request.shared:
            return Refusal(
                f"job {job.id} is a share of a GPU, whose sharing rules are its queue's: its queue cannot be "
                "changed (cancel it and submit it to the other queue)",
                field="queue",
            )
    if update.dependency is not None and update.dependency != (spec.dependency or ""):
        if st.state != JobState.PENDING:
            return Refusal(
                f"job {job.id} {state_phrase(st.state)}: a dependency can only be changed while the job is pending",
                field="dependency",
            )
        if update.dependency:
            try:
                dep = parse_dependency(update.dependency)
            except BadDependency as exc:
                return Refusal(str(exc), field="dependency", kind="invalid")
            if job.id in dep.job_ids:
                return Refusal(f"dependency: job {job.id} cannot depend on itself", field="dependency", kind="invalid")
    return None
