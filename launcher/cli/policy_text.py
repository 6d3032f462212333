"""How ``labgang explain`` and ``labgang queues`` word a queue's priority classes and per-user limits.

Built from ``GET /v1/queues`` (the QueueView's ``priority_classes``, ``default_priority_class``,
``user_limits``, ``users`` and ``at_limits``; launcher/coordinator/policy.py has the rules).
"""

from __future__ import annotations

# ``typing`` is for the type checker only: ``labgang queues`` imports this on the CLI fast path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

LIMIT_WORDS: dict[str, tuple[str, str, str]] = {
    "max_gpus_per_user": ("gpu", "gpus", "gpu"),
    "max_running_jobs_per_user": ("jobs", "running", "running jobs"),
    "max_submitted_jobs_per_user": ("submit", "submitted", "unfinished jobs"),
}
"""Limit key → (short name in the queues table, the user entry's field, the words in a sentence)."""


def limits_cell(q: Mapping[str, Any]) -> str:
    """The PER USER cell: ``gpu=4,jobs=2,submit=10``; ``-`` without limits."""
    limits = q.get("user_limits") or {}
    return ",".join(f"{LIMIT_WORDS[k][0]}={v}" for k, v in limits.items() if k in LIMIT_WORDS) or "-"


def at_limit_cell(q: Mapping[str, Any]) -> str:
    """The AT LIMIT cell: ``lab1(gpu),lab2(jobs)``; ``-`` when nobody is at a limit."""
    parts = [
        f"{u['user']}({'+'.join(LIMIT_WORDS[k][0] for k in u.get('at') or [] if k in LIMIT_WORDS)})"
        for u in q.get("users") or []
        if u.get("at")
    ]
    return ",".join(parts) or "-"


def queue_policy_sentences(q: Mapping[str, Any]) -> list[str]:
    """Sentences on who may use which priority in queue ``q`` and its per-user limits, with who is at them."""
    name = q["name"]
    out = []
    classes = q.get("priority_classes")
    if classes is not None:
        default = q.get("default_priority_class")
        named = ", ".join(f"{n} ({v})" for n, v in classes.items())
        plain = f"class {default} ({classes.get(default, '?')})" if default else "priority 0"
        value = classes.get(default) if default else 0
        # Slurm's --nice for users (launcher/coordinator/policy.py): anyone may lower their own job
        lower = f"-p NUMBER up to {value}" if value is not None else "-p NUMBER up to the default"
        if named:
            out.append(
                f"Jobs of {name} may use the priority classes {named}; without -p a job gets {plain}. "
                f"Anyone may lower their own job with {lower}; a higher number or another class is for admins only."
            )
        else:
            out.append(
                f"Jobs of {name} get {plain}; anyone may lower their own job with {lower}; "
                "only admins may give a higher one."
            )
    limits = q.get("user_limits") or {}
    if limits:
        said = ", ".join(f"{v} {LIMIT_WORDS[k][2]} ({k})" for k, v in limits.items() if k in LIMIT_WORDS)
        out.append(f"Each user of {name} may hold at most {said}.")
        at = [u for u in q.get("users") or [] if u.get("at")]
        if at:
            out.append("At a limit now: " + "; ".join(_standing(u, limits) for u in at) + ".")
        else:
            out.append("Nobody is at a limit now.")
    return out


def _standing(user: Mapping[str, Any], limits: Mapping[str, int]) -> str:
    parts = [
        f"{user.get(LIMIT_WORDS[k][1], 0)} of {limits[k]} {LIMIT_WORDS[k][2]}"
        for k in user.get("at") or []
        if k in LIMIT_WORDS and k in limits
    ]
    return f"{user['user']} ({', '.join(parts)})"


def job_limit_sentences(job: Mapping[str, Any], q: Mapping[str, Any] | None) -> list[str]:
    """For a job whose queue sets per-user limits: the limits and where the job's user stands."""
    if q is None or not q.get("user_limits"):
        return []
    limits = q["user_limits"]
    said = ", ".join(f"{v} {LIMIT_WORDS[k][2]}" for k, v in limits.items() if k in LIMIT_WORDS)
    who = job.get("user")
    mine = next((u for u in q.get("users") or [] if u.get("user") == who), None)
    if mine is None:
        return [f"Queue {q['name']} lets each user hold at most {said}; {who} has no unfinished job there."]
    running = mine.get("running", 0)
    holds = (
        f"{who} holds {mine.get('gpus', 0)} gpu in {running} running job{'' if running == 1 else 's'}, "
        f"{mine.get('submitted', 0)} unfinished in all"
    )
    at = f" and is at {', '.join(mine['at'])}" if mine.get("at") else ""
    return [f"Queue {q['name']} lets each user hold at most {said}; {holds}{at}."]
