"""``labgang explain QUEUE|JOB``: why a queue gets what it gets, why a job waits or was preempted.

Sentences with numbers, built from what the coordinator's API reports (``GET /v1/queues``:
usage, nominal quota, fair share, weight, the capacity the share is measured against, tenants'
decayed usage; ``GET /v1/jobs/{id}``: state, pending reason, the preemption rule that kept a
pending job from looking for victims, history with preemption reasons).
The share rules are the scheduler's (``launcher/scheduler/fairshare.py``), and so is the
preemption rule's sentence (``launcher/scheduler/preemption.py``); ``--json`` prints the same
numbers (for a job, ``no_preemption``: that rule's facts, or null).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from labgang.launcher.api.client import Client
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.format import format_resources, to_json
from labgang.launcher.cli.job_facts import normal_job_id, several_tasks
from labgang.launcher.cli.plumbing import json_option, state_dir_option, talks_to_coordinator
from labgang.launcher.cli.policy_text import job_limit_sentences, queue_policy_sentences
from labgang.launcher.cli.share_text import share_sentences


def _share(q: Mapping[str, Any]) -> float:
    value = q.get("fair_share")
    return math.inf if value is None else float(value)


def fmt_share(value: float) -> str:
    """``"250.00"`` or ``"inf"``."""
    return "inf" if math.isinf(value) else f"{value:.2f}"


def share_with(q: Mapping[str, Any], resource: str, devices: int) -> float:
    """The queue's share if ``devices`` more of ``resource`` were admitted."""
    nominal, used, basis = q.get("nominal") or {}, q.get("used") or {}, q.get("fair_share_basis") or {}
    weight = float(q.get("fair_weight", 1.0))
    best = 0.0
    for res, most in basis.items():
        above = used.get(res, 0) + (devices if res == resource else 0) - nominal.get(res, 0)
        if above > 0 and most > 0:
            best = max(best, above * 1000 / most)
    if best == 0:
        return 0.0
    return math.inf if weight <= 0 else best / weight


def explain_queue(q: Mapping[str, Any], queues: Sequence[Mapping[str, Any]], me: str | None = None) -> list[str]:
    """Sentences on one queue's quota, usage, share and its cohort's other queues, then who may
    submit there (and whether ``me``, the caller, may: :func:`submitter_sentences`), then its
    priority classes and per-user limits with who is at them."""
    return _share_sentences(q, queues) + submitter_sentences(q, queues, me) + queue_policy_sentences(q)


def submitter_sentences(q: Mapping[str, Any], queues: Sequence[Mapping[str, Any]], me: str | None) -> list[str]:
    """Who may submit to queue ``q`` (its view's ``submitters``: the config's ``users``/``groups``, both
    None for anyone; admins always may) and, from ``caller_may_submit``, whether the caller ``me`` may,
    with the queues they may use when not: ``Who may submit to nlp: users bob, root (and admins).``,
    ``You (alice) may not submit to nlp; you may submit to shared, vision.``. [] from a coordinator
    whose views do not say."""
    name, sub = q["name"], q.get("submitters")
    out = []
    if isinstance(sub, Mapping):
        users, groups = sub.get("users"), sub.get("groups")
        if users is None and groups is None:
            out.append(f"Anyone may submit to {name}.")
        else:
            who = []
            if users is not None:
                who.append(f"users {', '.join(users)}" if users else "no user by name")
            if groups:
                who.append(f"members of groups {', '.join(groups)}")
            out.append(f"Who may submit to {name}: {' and '.join(who)} (and admins).")
    may = q.get("caller_may_submit")
    if isinstance(may, bool):
        you = f"You ({me})" if me else "You"
        if may:
            out.append(f"{you} may submit to {name}.")
        else:
            usable = sorted(str(x["name"]) for x in queues if x.get("caller_may_submit"))
            elsewhere = f"you may submit to {', '.join(usable)}" if usable else "you may submit to no queue"
            out.append(f"{you} may not submit to {name}; {elsewhere}.")
    return out


def caller_name() -> str:
    """The user running the command (the name the coordinator knows the caller by), or their uid."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def _share_sentences(q: Mapping[str, Any], queues: Sequence[Mapping[str, Any]]) -> list[str]:
    name = q["name"]
    used = {res: n for res, n in (q.get("used") or {}).items() if n}
    nominal = q.get("nominal") or {}
    uses = format_resources(used) if used else "nothing"
    if nominal:
        out = [f"{name} uses {uses} of its nominal {format_resources(nominal)}."]
    else:
        out = [f"{name} uses {uses} and has no nominal quota."]
    cohort = q.get("cohort")
    if not cohort:
        out.append(f"{name} has no cohort: it neither borrows nor lends, and its share is 0.")
        return out
    borrowed, lent = q.get("borrowed") or {}, q.get("lent") or {}
    if borrowed:
        basis = q.get("fair_share_basis") or {}
        parts = [
            f"{n} {r} beyond its nominal quota (its cohort can reach {basis.get(r, 0)} {r} in all)"
            for r, n in sorted(borrowed.items())
        ]
        out.append(
            f"It borrows {'; '.join(parts)}: ratio {q.get('fair_share_ratio', 0):.2f} (x 1000), "
            f"divided by its weight {q.get('fair_weight', 1.0):g} gives its share {fmt_share(_share(q))}."
        )
    else:
        out.append(f"It borrows nothing, so its share is 0 (weight {q.get('fair_weight', 1.0):g}).")
    if lent:
        out.append(f"Other queues of cohort {cohort} use {format_resources(lent)} of its unused nominal.")
    peers = [p for p in queues if p.get("cohort") == cohort and p["name"] != name]
    if peers:
        listed = ", ".join(
            f"{p['name']} {fmt_share(_share(p))} (weight {p.get('fair_weight', 1.0):g})"
            for p in sorted(peers, key=_share, reverse=True)
        )
        out.append(f"Other queues of cohort {cohort}, highest share first: {listed}.")
        lower = [p["name"] for p in peers if _share(p) < _share(q)]
        if lower and q.get("fair_sharing"):  # without fair sharing, shares decide nothing between queues
            out.append(
                f"When queues compete for idle devices, the lowest share goes first: {', '.join(lower)} "
                f"before {name}; a queue above its nominal may lose jobs to one whose share stays lower."
            )
    tenants = q.get("tenants") or []
    if tenants:
        listed = ", ".join(
            f"{t['name']} {t['usage']:.2f} (weight {t['weight']:g}, score "
            f"{'inf' if t.get('score') is None else format(t['score'], '.2f')})"
            for t in sorted(tenants, key=lambda t: math.inf if t.get("score") is None else t["score"])
        )
        out.append(f"Inside {name}, jobs of the tenant with the lowest decayed usage / weight go first: {listed}.")
    return out


STATE_PHRASES: dict[str, str] = {
    "pending": "is pending",
    "admitted": "was admitted and is starting",
    "running": "is running",
    "terminating": "is stopping",
    "succeeded": "has succeeded",
    "failed": "has failed",
    "cancelled": "was cancelled",
    "timeout": "was stopped by its time limit",
    "node_fail": "failed because its node was lost",
}
"""How a sentence says a job is in each state (``launcher/lifecycle/states.py``'s wire names)."""


def state_phrase(state: str) -> str:
    """``"has succeeded"``, ``"was cancelled"``, ``"is pending"``…; an unknown state: ``"is in state X"``."""
    return STATE_PHRASES.get(state, f"is in state {state}")


def preemption_sentences(job: Mapping[str, Any]) -> list[str]:
    """One sentence per preemption in the job's history.

    A preempted job gets two history lines with the same ``preempted by job N: <reason>`` (``reclaimed
    by queue Q for job N: <why>; <reason>`` when another queue of its cohort took it back): one when
    its ranks are told to stop (``stopping``, ending ``; stopping every rank``) and one when it goes
    back to its queue (``requeued``, ending ``; restart N``). They are merged into one sentence that
    says both; a later preemption (after the job ran again) gets its own sentence.
    """
    found: list[dict[str, str]] = []  # per preemption: "head", and the "stopping"/"requeued" tails seen
    for h in job.get("history") or []:
        message = str(h.get("message", ""))
        if not message.startswith(("preempted by job", "reclaimed by queue")):
            continue
        head, _, tail = message.rpartition("; ")
        if not head:
            head, tail = message, ""
        event = str(h.get("event", ""))
        last = found[-1] if found else None
        if event == "requeued" and last is not None and last["head"] == head and set(last) == {"head", "stopping"}:
            last["requeued"] = tail
        else:
            found.append({"head": head, event: tail})
    out = []
    for p in found:
        stopping, requeued = p.get("stopping"), p.get("requeued")
        if stopping == "stopping every rank":
            stopping = "stopping every rank" if job.get("state") == "terminating" else "every rank was stopped"
        if stopping is not None and requeued is not None:
            what = f"{stopping} and it went back to its queue as {requeued}"
        elif requeued is not None:
            what = f"it went back to its queue as {requeued}"
        else:  # "stopping" alone, or another event: its own tail
            what = stopping if stopping is not None else next((t for k, t in p.items() if k != "head"), "")
        out.append(f"It was {p['head']}" + (f"; {what}." if what else "."))
    return out


def no_preemption(job: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The preemption rule that kept a pending job from looking for victims (the JobView's
    ``reason.no_preemption``, set by the scheduler's own check, docs/queue-semantics.md §A3.1),
    or None."""
    reason = job.get("reason") or {}
    if job.get("state") != "pending":
        return None
    refusal = reason.get("no_preemption")
    return refusal if isinstance(refusal, Mapping) else None


CAPACITY_CODES = frozenset({"no_capacity", "fragmented", "topology", "host_resources", "reserved_for_starving"})
"""Pending reasons about the nodes' free room, which a drained node's devices would add to."""


def waits_for_room(job: Mapping[str, Any]) -> bool:
    """True for a job pending for room on the nodes (its reason one of :data:`CAPACITY_CODES`)."""
    return job.get("state") == "pending" and (job.get("reason") or {}).get("code") in CAPACITY_CODES


def drained_sentence(job: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> str | None:
    """For a job pending for room on the nodes (:func:`waits_for_room`): the drained nodes that
    have devices of its resource, each with its count, admin and reason (``labgang drain``); None
    where the job waits for something else or no such node is drained."""
    if not waits_for_room(job):
        return None
    resource = job.get("resource", "gpu")
    parts = []
    for node in nodes:
        drain = node.get("drain")
        count = sum(1 for d in node.get("devices") or [] if d.get("resource") == resource)
        if isinstance(drain, Mapping) and count:
            parts.append(f"{node.get('name')} ({count} {resource}, by {drain.get('by')}: {drain.get('reason')})")
    if not parts:
        return None
    return f"Drained nodes take no new job: {', '.join(parts)}; an admin's `labgang resume NODE` offers them again."


def explain_job(
    job: Mapping[str, Any], queues: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]] = ()
) -> list[str]:
    """Sentences on why a job waits, runs or was preempted, with its queue's share; ``nodes`` (the
    NodeViews) name the drained nodes a job waiting for room cannot use (:func:`drained_sentence`)."""
    jid, state = job["id"], job.get("state", "?")
    q = next((x for x in queues if x["name"] == job.get("queue")), None)
    groups = job.get("groups") or []
    resource = job.get("resource", "gpu")
    if groups:  # a job of groups (docs/job-groups.md): its devices are its groups' together
        devices = sum(int(g.get("workers", 1)) * int(g.get("gpus_per_worker", 1)) for g in groups)
        shape = " + ".join(f"{g.get('name')} {g.get('workers')} x {g.get('gpus_per_worker')}" for g in groups)
        what = f"groups {shape} {resource}, admitted all or nothing"
    else:
        devices = int(job.get("workers", 1)) * int(job.get("gpus_per_worker", 1))
        what = f"{job.get('workers')} x {job.get('gpus_per_worker')} {resource}"
    shards, mps = int(job.get("shards") or 0), int(job.get("mps") or 0)
    if shards or mps:  # a share of one card, as the queue table's GANG says it: not a whole gpu
        what = f"{job.get('workers')} x {f'shard:{shards}' if shards else f'mps:{mps}'}"
    out = [f"job {jid} ({what}) in queue {job.get('queue')} {state_phrase(state)}."]
    out.extend(share_sentences(job))
    reason = job.get("reason") or {}
    if state == "pending" and reason.get("message"):
        message = str(reason["message"])
        # a dependency's reason already reads "waits for afterok:7 (running)"
        also = reason.get("dependency")  # held and waiting for its dependency: the hold, then the dependency
        if also:
            message = message.split("; also ", 1)[0]
        said = f"It {message}" if message.startswith("waits ") else f"It waits: {message}"
        out.append(f"{said} ({reason.get('code')}).")
        if also:
            waits = str(also.get("message") or "")
            said = f"It also {waits}" if waits.startswith("waits ") else f"It also waits: {waits}"
            out.append(f"{said} ({also.get('code')}): released, it still starts only once that holds.")
        drained = drained_sentence(job, nodes)
        if drained is not None:
            out.append(drained)
    refusal = no_preemption(job)
    if refusal is not None:
        text = str(refusal["message"])
        out.append(f"{text[:1].upper()}{text[1:]}.")
    out.extend(preemption_sentences(job))
    out.extend(job_limit_sentences(job, q))
    if q is not None and q.get("cohort"):
        now, after = _share(q), share_with(q, resource, devices)
        if state == "pending":
            out.append(
                f"Queue {q['name']}'s share is {fmt_share(now)} (weight {q.get('fair_weight', 1.0):g}); "
                f"starting job {jid} would raise it to {fmt_share(after)}."
            )
            rivals = [p for p in queues if p.get("cohort") == q.get("cohort") and p["name"] != q["name"]]
            above = [p for p in rivals if _share(p) > after]
            below = [p for p in rivals if _share(p) <= after and p.get("pending")]
            fair = bool(q.get("fair_sharing"))  # without fair sharing, shares decide nothing between queues
            if above and fair:
                out.append(
                    "Still below "
                    + ", ".join(f"{p['name']}'s {fmt_share(_share(p))}" for p in above)
                    + ": with fair sharing it wins against them for idle devices and may reclaim from them."
                )
            if below and fair:
                out.append(
                    "Queues with waiting jobs at or below that share go first: "
                    + ", ".join(f"{p['name']} {fmt_share(_share(p))}" for p in below)
                    + "."
                )
        else:
            out.append(f"Queue {q['name']}'s share is {fmt_share(now)} (weight {q.get('fair_weight', 1.0):g}).")
    return out


@click.command()
@click.argument("name", metavar="QUEUE|JOB")
@json_option("Print the sentences and the facts behind them as JSON.")
@state_dir_option
@talks_to_coordinator
def explain(state_dir: Path | None, name: str, as_json: bool) -> None:
    """Explain in sentences with numbers why a queue gets what it gets (its share against its
    cohort's other queues) or why a job waits, runs or was preempted."""
    with Client.for_state_dir(state_dir) as client:
        queues = client.queues()
        q = next((x for x in queues if x["name"] == name), None)
        if q is not None:
            sentences = explain_queue(q, queues, caller_name())
            payload: dict[str, Any] = {"queue": q, "sentences": sentences}
        elif normal_job_id(name) is not None:  # a job number, or an array task such as 12_7
            job = client.job(str(normal_job_id(name)))
            sentences = explain_job(job, queues, client.nodes() if waits_for_room(job) else ())
            queue = next((x for x in queues if x["name"] == job.get("queue")), None)
            payload = {"job": job, "queue": queue, "no_preemption": no_preemption(job), "sentences": sentences}
        elif several_tasks(name):  # a folded task list as `queue` prints it: 12_[2-20%2]
            raise CommandFailed(str(several_tasks(name)), 2)
        else:
            allowed = ", ".join(x["name"] for x in queues)
            raise CommandFailed(
                f"{name!r} is neither a queue nor a job id; allowed: a job number or one of {allowed}", 2
            )
    click.echo(to_json(payload) if as_json else "\n".join(sentences))
