"""Cohort trees and fair sharing for ``labgang export slurm``: the Slurm account hierarchy.

Slurm's nearest to a cohort tree is its account tree: each cohort becomes an account under its
parent cohort's account ``cohort-<name>`` (a root cohort: under ``root``), and each queue's account sits under
its cohort's. With ``fair_sharing`` each account gets ``Fairshare`` = its ``fair_weight`` x 100
(Slurm's shares are integers) and slurm.conf weighs fair share in job priority. Slurm's fair
share orders jobs by past usage (Fair Tree), not by Kueue's share of borrowed quota, and a
cohort's own quota has no Slurm pool: both are listed as gaps. ``admission_fair_sharing``'s
half-life and sampling interval become ``PriorityDecayHalfLife`` and ``PriorityCalcPeriod``.
"""

from __future__ import annotations

import math
import shlex

from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.export.common import ExportError, Gap, cohort_members, unique

COHORT_PREFIX = "cohort-"
FAIRSHARE_SCALE = 100
PRIORITY_WEIGHT_FAIRSHARE = 10000


def fairshare(weight: float) -> int:
    """A fair-sharing weight as Slurm's integer ``Fairshare`` (weight x 100, rounded)."""
    return round(weight * FAIRSHARE_SCALE)


def slurm_duration(seconds: float) -> str:
    """Seconds as Slurm's ``days-hours:minutes:seconds`` (rounded up to a whole second)."""
    total = math.ceil(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"


def cohort_account_names(cfg: ClusterConfig, queues: dict[str, str], name_of: dict[str, str]) -> dict[str, str]:
    """Cohort -> Slurm account name; refuses a cohort whose account would be a queue's.

    Args:
        cfg: the config.
        queues: queue name -> its account (and QOS) name.
        name_of: cohort -> its Slurm spelling (already checked).

    Raises:
        ExportError: two cohorts, or a cohort and a queue, share an account name.
    """
    where = {c.name: f"cohorts[{i}].name" for i, c in enumerate(cfg.cohorts)}
    names = unique(((where.get(c, "cohorts"), c, name_of[c]) for c in cohort_members(cfg)), "account")
    taken = set(queues.values())
    for cohort, account in names.items():
        if account in taken:
            raise ExportError(
                where.get(cohort, "cohorts"),
                f"cohort {cohort!r} and a queue both become account {account!r}; allowed: distinct names",
            )
    return names


def account_lines(cfg: ClusterConfig, queues: dict[str, str], cohorts: dict[str, str]) -> list[str]:
    """``sacctmgr`` lines adding the cohort and queue accounts, parents first."""
    parent_of = {c.name: c.parent for c in cfg.cohorts}
    weight_of = {c.name: c.fair_weight for c in cfg.cohorts}
    out: list[str] = []
    done: set[str] = set()

    def add(cohort: str) -> None:
        if cohort in done:
            return
        parent = parent_of.get(cohort)
        if parent is not None:
            add(parent)
        words = [f"add account {cohorts[cohort]}", f"Description={shlex.quote('labgang cohort ' + cohort)}"]
        if parent is not None:
            words.append(f"parent={cohorts[parent]}")
        if cfg.fair_sharing:
            words.append(f"Fairshare={fairshare(weight_of.get(cohort, 1.0))}")
        out.append("sacctmgr -i " + " ".join(words))
        done.add(cohort)

    for cohort in sorted(cohorts, key=lambda c: cohorts[c]):
        add(cohort)
    for q in sorted(cfg.queues, key=lambda q: queues[q.name]):
        words = [f"add account {queues[q.name]}", f"Description={shlex.quote('labgang queue ' + q.name)}"]
        if q.cohort is not None:
            words.append(f"parent={cohorts[q.cohort]}")
        if cfg.fair_sharing:
            words.append(f"Fairshare={fairshare(q.fair_weight)}")
        out.append("sacctmgr -i " + " ".join(words))
    return out


def conf_lines(cfg: ClusterConfig) -> list[str]:
    """slurm.conf settings for fair sharing (none when the config does not share)."""
    lines = []
    if cfg.fair_sharing or cfg.admission_fair_sharing is not None:
        lines.append(f"PriorityWeightFairshare={PRIORITY_WEIGHT_FAIRSHARE}")
    afs = cfg.admission_fair_sharing
    if afs is not None:
        lines.append(f"PriorityDecayHalfLife={slurm_duration(afs.half_life)}")
        lines.append(f"PriorityCalcPeriod={max(1, math.ceil(afs.sampling_interval / 60))}")
    return lines


def gaps(cfg: ClusterConfig) -> list[Gap]:
    """What cohort trees and fair sharing lose in Slurm."""
    out: list[Gap] = []
    for i, c in enumerate(cfg.cohorts):
        if c.nominal:
            out.append(
                Gap(
                    f"cohorts[{i}].nominal",
                    "quota owned by a cohort",
                    "counted into the -borrow GrpTRES of the queues below it",
                )
            )
        if c.borrowing_limit or c.lending_limit:
            out.append(
                Gap(
                    f"cohorts[{i}].borrowing_limit, cohorts[{i}].lending_limit",
                    "limits between a subtree and the rest of the tree",
                    "counted into the -borrow GrpTRES of the queues below it",
                )
            )
    if cfg.fair_sharing:
        out.append(
            Gap(
                "fair_sharing, fair_preemption",
                "dominant-resource shares of borrowed quota and preemption to equalise them",
                "Fairshare on the account tree (priority/multifactor, Fair Tree): orders by past usage, never preempts",
            )
        )
    for i, t in enumerate(cfg.tenants):
        out.append(
            Gap(
                f"tenants[{i}]",
                f"tenant {t.name!r} of queue {t.queue!r}",
                "its users as users of the queue's account, with Fairshare (sacctmgr add user … Fairshare=)",
            )
        )
    return out
