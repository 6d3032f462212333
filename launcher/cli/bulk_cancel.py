"""``labgang cancel`` by filters, as Slurm's ``scancel -u USER -t PENDING -p QUEUE -n NAME``: which
jobs the filters select. Without click, shared by the fast path (:mod:`labgang.launcher.cli.quick`)
and the click command (:mod:`labgang.launcher.cli.jobs`); each selected job is then cancelled as
one named on the command line (:func:`labgang.launcher.cli.job_facts.cancel_jobs`: the owner or an
admin only, one line per job).
"""

from __future__ import annotations

from labgang.launcher.cli.job_facts import active_jobs

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from labgang.launcher.api.client import Client

FILTER_FLAGS = "-u/--user, -q/--queue, -t/--state, --name"
"""The filters ``cancel`` takes, for its messages."""


def selected_jobs(
    client: Client,
    *,
    job_ids: tuple[str, ...] = (),
    users: tuple[str, ...] = (),
    queues: tuple[str, ...] = (),
    states: tuple[str, ...] = (),
    names: tuple[str, ...] = (),
) -> tuple[list[str], list[str]]:
    """The active jobs that every given filter matches (AND; a filter's items are alternatives).

    Args:
        client: the coordinator client.
        job_ids: ids named on the command line (jobs, tasks ``12_7``, arrays ``12``): only these,
            of any user; empty: the caller's own jobs, or ``users``'.
        users: user names or uids of this machine (:func:`labgang.launcher.job_filters.user_name`);
            ``all`` among them: every user's jobs (as ``history -u all``; each cancel is still the owner's
            or an admin's to make).
        queues / states / names: queue names, JobState values, job names.

    Returns:
        ``(job ids in submission order, notes for standard error)``: a note says when nothing matched.

    Raises:
        ApiError: 400 an unknown queue or state. CoordinatorUnavailable: no coordinator answers.
    """
    from labgang.launcher.job_filters import user_name, whose_jobs

    everyone, users = whose_jobs(False, users)
    users = tuple(dict.fromkeys(user_name(name) for name in users))
    rows = client.jobs(
        all_users=bool(job_ids) or everyone,
        user=",".join(users) or None,
        queue=",".join(queues) or None,
        states=states,
        view="queue",
    )
    wanted = set(job_ids)
    picked = [
        str(row["id"])
        for row in active_jobs(rows)
        if (not users or row.get("user") in users)
        and (not queues or row.get("queue") in queues)
        and (not states or row.get("state") in states)
        and (not names or row.get("name") in names)
        and (not wanted or str(row["id"]) in wanted or str(row.get("array_id")) in wanted)
    ]
    if picked:
        return picked, []
    who = ("all",) if everyone else users
    filters = (("user", who), ("queue", queues), ("state", states), ("name", names), ("job", job_ids))
    which = " and ".join(f"{name} {','.join(values)}" for name, values in filters if values)
    return [], [f"no active job matches {which}; nothing to cancel"]
