"""``labgang export slurm``: the queue policy as a ``slurm.conf`` fragment, ``gres.conf`` and a ``sacctmgr`` script.

Slurm has no borrowing between queues. The nearest, used here, is the common
"owner plus scavenger" layout: each queue's guaranteed share is a QOS whose ``GrpTRES``
is its nominal quota, and what it may borrow is a second QOS ``<queue>-borrow`` whose
``GrpTRES`` caps the borrowed devices (its borrowing limit, at most what the rest of its
cohort lends) and whose jobs the lenders preempt (``PreemptMode=REQUEUE``), which is what
reclaim does. A job must be submitted to the borrow partition or QOS itself: Slurm does
not move a job there when the queue's quota is full.

Two layouts (``mode``):

- ``partitions``: a partition per queue (``PriorityTier=2``, partition QOS = the queue's
  QOS) and a partition ``<queue>-borrow`` (``PriorityTier=1``) over the same nodes;
  ``PreemptType=preempt/partition_prio``; priority classes become job QOS
  (``prio-<class>``) with ``Priority``.
- ``qos``: one partition ``labgang``; the queue is the job's QOS (``<queue>`` and
  ``<queue>-borrow``); ``PreemptType=preempt/qos`` with ``Preempt=`` lists.

Whole GPUs are GRES ``gpu:<type>``, MIG devices ``gpu:<type>_<profile>``, with types spelled
as ``AutoDetect=nvml`` names them (lower case, spaces as ``_``; MIG: the GPU name up to its
first ``-``). The mapping table is in ``docs/export.md``.
"""

from __future__ import annotations

import math
import re
import shlex

from labgang.launcher.config.cluster import ClusterConfig, QueueConfig
from labgang.launcher.export import gpu_sharing, slurm_accounts, slurm_users
from labgang.launcher.export.common import (
    Export,
    ExportError,
    Gap,
    Inventory,
    NodeGpus,
    borrow_cap,
    cohort_members,
    header_lines,
    host_quota_gaps,
    resource_names,
    split_quota,
    tree_peers,
    unique,
)
from labgang.launcher.model import GPU, MIG_PREFIX

MODES = ("partitions", "qos")
SLURM_CONF = "slurm.conf"
GRES_CONF = "gres.conf"
SACCTMGR = "sacctmgr.sh"
SHARED_PARTITION = "labgang"
OWNER_TIER = 2
BORROW_TIER = 1
PRIORITY_WEIGHT_QOS = 10000
UINT32_MAX = 2**32 - 1
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def gres_type(model: str) -> str:
    """A whole GPU's GRES type as ``AutoDetect=nvml`` spells it: lower case, spaces as ``_``."""
    return model.strip().lower().replace(" ", "_")


def mig_gres_type(model: str | None, profile: str) -> str:
    """A MIG device's GRES type: the GPU type cut at its first ``-``, ``_``, the profile (no model: the profile)."""
    if not model:
        return profile
    return gres_type(model).split("-", 1)[0] + "_" + profile


def _slurm_name(raw: str, where: str) -> str:
    if not _NAME_RE.match(raw) or len(raw) > 64:
        raise ExportError(
            where,
            f"{raw!r} is not a Slurm partition, QOS or account name; allowed: letters, digits, '_', '.', '-' "
            "(starting with a letter or digit), at most 64 characters",
        )
    return raw.lower()


def _tres(cfg: ClusterConfig, inv: Inventory, counts: dict[str, int]) -> str:
    """``gres/gpu=N[,gres/gpu:<type>=M...]`` for labgang counts per resource (MIG counts also count in gres/gpu)."""
    parts: dict[str, int] = {}
    total = 0
    profiles = inv.mig_profiles()
    for resource, n in counts.items():
        total += n
        if resource.startswith(MIG_PREFIX):
            profile = resource.removeprefix(MIG_PREFIX)
            models = profiles.get(profile) or {"": 1}
            for model, part in split_quota(n, models).items():
                key = f"gres/gpu:{mig_gres_type(model, profile)}"
                parts[key] = parts.get(key, 0) + part
    items = [f"gres/gpu={total}"] + [f"{k}={v}" for k, v in sorted(parts.items())]
    return ",".join(items)


def _qos_names(cfg: ClusterConfig, mode: str) -> tuple[dict[str, str], dict[str, str]]:
    queue_names = [
        (f"queues[{i}].name", q.name, _slurm_name(q.name, f"queues[{i}].name")) for i, q in enumerate(cfg.queues)
    ]
    queues = unique(queue_names, "partition/QOS")
    classes: dict[str, str] = {}
    if mode == "partitions":
        triples = [
            (f"priority_classes.{n}", n, "prio-" + _slurm_name(n, f"priority_classes.{n}"))
            for n in cfg.priority_classes
        ]
        classes = unique(triples, "QOS")
    taken = {*queues.values(), *(v + "-borrow" for v in queues.values())}
    for name, qos in classes.items():
        if qos in taken:
            raise ExportError(f"priority_classes.{name}", f"QOS {qos!r} is also a queue's QOS; allowed: another name")
    return queues, classes


def _cohort_spellings(cfg: ClusterConfig) -> dict[str, str]:
    """Cohort -> its Slurm account (``cohort-<name>``, so a queue may share a cohort's name; checked
    against the key path of the first place naming it)."""
    where: dict[str, str] = {c.name: f"cohorts[{i}].name" for i, c in enumerate(cfg.cohorts)}
    for i, q in enumerate(cfg.queues):
        if q.cohort is not None:
            where.setdefault(q.cohort, f"queues[{i}].cohort")
    for i, c in enumerate(cfg.cohorts):
        if c.parent is not None:
            where.setdefault(c.parent, f"cohorts[{i}].parent")
    return {c: slurm_accounts.COHORT_PREFIX + _slurm_name(c, where[c]) for c in cohort_members(cfg)}


def _borrowable(cfg: ClusterConfig, q: QueueConfig) -> dict[str, int]:
    caps = {r: borrow_cap(cfg, q, r) for r in resource_names(cfg, Inventory())}
    return {r: n for r, n in caps.items() if n > 0}


def _grace(cfg: ClusterConfig) -> int:
    return math.ceil(cfg.default_grace_s)


def _reclaimers(cfg: ClusterConfig, q: QueueConfig) -> list[QueueConfig]:
    """Queues of ``q``'s cohort tree that reclaim devices lent to ``q``."""
    return [m for m in tree_peers(cfg, q) if m.reclaim_within_cohort.value != "never"]


def _nodes(inv: Inventory, cfg: ClusterConfig) -> list[str]:
    lines = []
    for node in inv.nodes:
        gres = [f"gpu:{gres_type(m)}:{n}" for m, n in node.gpus] + [
            f"gpu:{mig_gres_type(m, p)}:{n}" for m, p, n in node.mig
        ]
        gres += gpu_sharing.node_gres(cfg, node)
        if gres:
            lines.append(f"NodeName={node.name} Gres={','.join(gres)} State=UNKNOWN")
        else:
            lines.append(f"NodeName={node.name} State=UNKNOWN  # no allocatable GPU")
    return lines


def _gres_conf(inv: Inventory, cfg: ClusterConfig) -> list[str]:
    lines = ["AutoDetect=nvml"]
    for node in inv.nodes:
        lines += _node_gres(node) + gpu_sharing.gres_conf(cfg, node)
    return lines


def _node_gres(node: NodeGpus) -> list[str]:
    out = []
    for m, n in node.gpus:
        out.append(f"NodeName={node.name} Name=gpu Type={gres_type(m)} Count={n}")
    for m, p, n in node.mig:
        out.append(f"NodeName={node.name} Name=gpu Type={mig_gres_type(m, p)} Count={n}")
    return out


def _gaps(cfg: ClusterConfig, mode: str, inv: Inventory) -> list[Gap]:
    gaps: list[Gap] = host_quota_gaps(cfg, "add cpu=N,mem=M to the QOS GrpTRES by hand")
    for i, q in enumerate(cfg.queues):
        if q.cohort is not None and _borrowable(cfg, q):  # a queue that never borrows gets no -borrow QOS
            gaps.append(
                Gap(
                    f"queues[{i}].cohort",
                    "automatic borrowing of idle quota from the cohort",
                    f"submit to {'partition' if mode == 'partitions' else 'QOS'} {q.name.lower()}-borrow "
                    "(GrpTRES = the most it may borrow; lenders requeue its jobs)",
                )
            )
        if q.lending_limit:
            gaps.append(
                Gap(
                    f"queues[{i}].lending_limit",
                    "a per-lender cap",
                    "counted into the borrowers' -borrow GrpTRES (the sum of what the cohort lends)",
                )
            )
        if q.within_queue.value != "never" and mode == "partitions":
            gaps.append(
                Gap(
                    f"queues[{i}].within_queue",
                    "preempting lower-priority jobs of the same queue",
                    "none with preempt/partition_prio; --slurm-mode qos has preempt/qos across QOS only",
                )
            )
        elif q.within_queue.value != "never":
            gaps.append(
                Gap(
                    f"queues[{i}].within_queue",
                    "preempting lower-priority jobs of the same queue",
                    "none: preempt/qos preempts across QOS, and a queue is one QOS",
                )
            )
        if q.borrow_within_cohort.policy.value != "never":
            gaps.append(
                Gap(
                    f"queues[{i}].borrow_within_cohort",
                    "preempting other queues' lower-priority jobs while borrowing",
                    "none (only the owner tier/QOS preempts the -borrow one)",
                )
            )
        if q.reclaim_within_cohort.value == "lower-priority":
            gaps.append(
                Gap(
                    f"queues[{i}].reclaim_within_cohort",
                    "reclaiming only from lower-priority borrowers",
                    "any borrower's job is requeued (tier/QOS order, not job priority)",
                )
            )
        if q.queueing.value == "strict-fifo":
            gaps.append(
                Gap(
                    f"queues[{i}].queueing",
                    "strict FIFO (a blocked head stops the queue)",
                    "SchedulerType=sched/builtin for the whole cluster; backfill lets smaller jobs pass",
                )
            )
        if q.starvation_after is not None:
            gaps.append(
                Gap(
                    f"queues[{i}].starvation_after",
                    "the starvation reservation",
                    "the backfill scheduler's reservation for top-priority jobs, and PriorityWeightAge",
                )
            )
        if q.groups is not None and (mode == "qos" or q.users is not None):
            gaps.append(
                Gap(
                    f"queues[{i}].groups",
                    "access by Unix group" + (" or user" if q.users is not None else ""),
                    "add the group's members as users of the account " + q.name.lower(),
                )
            )
    if cfg.priority_classes and mode == "qos":
        gaps.append(
            Gap(
                "priority_classes",
                "per-job priority classes (a job's QOS is its queue)",
                "--slurm-mode partitions (a QOS per class), or an operator's `scontrol update job Priority=`",
            )
        )
    if mode == "partitions" and cfg.priority_classes and min(cfg.priority_classes.values()) < 0:
        shift = -min(cfg.priority_classes.values())
        gaps.append(
            Gap(
                "priority_classes",
                "negative priorities",
                f"QOS Priority is unsigned: every class shifted by +{shift}",
            )
        )
    gaps.append(
        Gap(
            "default_grace_s",
            "a job's own grace period",
            f"GraceTime={_grace(cfg)} (seconds, rounded up) per partition/QOS; a job may ask for --signal",
        )
    )
    if cfg.admin_groups:
        gaps.append(Gap("admin_groups", "administrators by Unix group", "AdminLevel per user (sacctmgr)"))
    if any(p for n in inv.nodes for p in n.mig) and any(GPU in q.nominal for q in cfg.queues):
        gaps.append(
            Gap(
                "queues[*].nominal.gpu",
                "a quota of whole GPUs only",
                "gres/gpu counts MIG devices too: GrpTRES gres/gpu is whole GPUs plus the queue's MIG quota",
            )
        )
    if any(len(models) > 1 for models in inv.mig_profiles().values()):
        gaps.append(
            Gap(
                "inventory",
                "one MIG profile counted over several GPU models",
                "a typed GRES limit per model, split by the cluster's share of each model",
            )
        )
    gaps.append(
        Gap(
            "startup_timeout_s, requeue_backoff_s, requeue_backoff_max_s, max_start_failures",
            "start timeout and retry backoff",
            "BatchStartTimeout, and requeued jobs' held state (JobRequeue, MaxBatchRequeue)",
        )
    )
    return gaps


def _partition(name: str, tier: int, qos: str | None, extra: list[str]) -> str:
    words = [f"PartitionName={name}", "Nodes=ALL", f"PriorityTier={tier}"]
    if qos:
        words.append(f"QOS={qos}")
    return " ".join(words + extra + ["State=UP"])


def _queue_partitions(cfg: ClusterConfig, q: QueueConfig, name: str, borrow: bool, grace: int) -> list[str]:
    """The owner partition of queue ``q`` and, when it can borrow, its ``-borrow`` partition."""
    access: list[str] = []
    if q.users is not None:
        access.append(f"AllowAccounts={name}")
    elif q.groups is not None:
        access.append(f"AllowGroups={','.join(sorted(q.groups))}")
    own = [*access, f"GraceTime={grace}", "PreemptMode=OFF"]
    if q.name == cfg.default_queue:
        own.insert(0, "Default=YES")
    out = [_partition(name, OWNER_TIER, name, own)]
    if borrow:
        preempt = "REQUEUE" if _reclaimers(cfg, q) else "OFF"
        out.append(
            _partition(
                f"{name}-borrow",
                BORROW_TIER,
                f"{name}-borrow",
                [*access, f"GraceTime={grace}", f"PreemptMode={preempt}"],
            )
        )
    return out


def _class_qos(cfg: ClusterConfig, classes: dict[str, str]) -> list[str]:
    """``sacctmgr`` lines adding a QOS per priority class, priorities shifted to be >= 0."""
    values = cfg.priority_classes.values()
    shift = -min(values) if values and min(values) < 0 else 0
    out = []
    for cls_name, value in sorted(cfg.priority_classes.items(), key=lambda kv: classes[kv[0]]):
        if value + shift > UINT32_MAX:
            raise ExportError(
                f"priority_classes.{cls_name}",
                f"{value} is above Slurm's QOS priority range; allowed: up to {UINT32_MAX - shift}",
            )
        out.append(_sacctmgr(f"add qos {classes[cls_name]} Priority={value + shift}"))
    return out


def _sacctmgr(cmd: str) -> str:
    return "sacctmgr -i " + cmd


def build(
    cfg: ClusterConfig, inv: Inventory, mode: str = "partitions", directory: slurm_users.Directory | None = None
) -> tuple[list[str], list[str], list[str], list[Gap]]:
    """The ``slurm.conf`` fragment, ``gres.conf`` and ``sacctmgr`` script lines, and the gaps.

    Args:
        cfg: a validated cluster config.
        inv: the inventory (may be empty: then no ``NodeName`` lines and untyped MIG GRES).
        mode: ``"partitions"`` or ``"qos"`` (see the module docstring).
        directory: where the queues' users are found (groups' members, login users of an open
            queue: :mod:`.slurm_users`); None = this machine's password and group databases.

    Returns:
        ``(slurm_conf, gres_conf, sacctmgr, gaps)``; lines without the header.

    Raises:
        ExportError: a queue or class name Slurm cannot use, two names that collide, a
            QOS priority above 2^32-1.
        ValueError: ``mode`` is not one of ``MODES``.
    """
    if mode not in MODES:
        raise ValueError(f"mode: {mode!r}; allowed: {', '.join(MODES)}")
    directory = directory or slurm_users.Directory()
    queues, classes = _qos_names(cfg, mode)
    cohorts = slurm_accounts.cohort_account_names(cfg, queues, _cohort_spellings(cfg))
    grace = _grace(cfg)
    default = cfg.default_queue
    conf = ["GresTypes=" + ",".join(["gpu", *gpu_sharing.gres_types(cfg)])]
    tres = ["gres/gpu", *(f"gres/{t}" for t in gpu_sharing.gres_types(cfg))]
    for model in inv.gpu_models():
        tres.append(f"gres/gpu:{gres_type(model)}")
    for r in resource_names(cfg, inv):
        if r.startswith(MIG_PREFIX):
            profile = r.removeprefix(MIG_PREFIX)
            for model in inv.mig_profiles().get(profile) or {"": 1}:
                tres.append(f"gres/gpu:{mig_gres_type(model, profile)}")
    conf += [
        "# AccountingStorageTRES needs slurmdbd (AccountingStorageType=accounting_storage/slurmdbd)",
        f"AccountingStorageTRES={','.join(sorted(set(tres), key=lambda t: (t != 'gres/gpu', t)))}",
        "AccountingStorageEnforce=associations,limits,qos",
        "PriorityType=priority/multifactor",
        f"PriorityWeightQOS={PRIORITY_WEIGHT_QOS}",
        *slurm_accounts.conf_lines(cfg),
        "PreemptType=" + ("preempt/partition_prio" if mode == "partitions" else "preempt/qos"),
        "PreemptMode=REQUEUE",
        "JobRequeue=1",
    ]
    nodes = _nodes(inv, cfg)
    conf += nodes or ["# no inventory: add NodeName=<node> Gres=gpu:<type>:<count> lines for your GPU nodes"]
    adds: list[str] = []  # QOS creation and settings without TRES: before slurmctld starts
    limits: list[str] = []  # GrpTRES: once slurmctld has registered the gres/gpu TRES
    preempts: list[str] = []
    accts: list[str] = slurm_accounts.account_lines(cfg, queues, cohorts)
    partitions: list[str] = []
    open_qos: list[str] = []
    associations: list[str] = []  # per-user limits and class QOS: after the accounts and users exist
    users_of: dict[str, list[str]] = {}
    admins_added: set[str] = set()
    for q in sorted(cfg.queues, key=lambda q: queues[q.name]):
        name = queues[q.name]
        borrow = _borrowable(cfg, q)
        nominal = {r: q.nominal[r] for r in resource_names(cfg, inv) if r in q.nominal}
        settings = [f"GraceTime={grace}"]
        if mode == "qos":
            settings.append(f"Priority={OWNER_TIER}")
            victims = sorted(
                queues[m.name] + "-borrow"
                for m in tree_peers(cfg, q)
                if _borrowable(cfg, m) and q.reclaim_within_cohort.value != "never"
            )
            if victims:  # set after every QOS exists
                preempts.append(_sacctmgr(f"modify qos where name={name} set Preempt={','.join(victims)}"))
        adds.append(_sacctmgr(f"add qos {name} " + " ".join(settings)))
        per_user = "".join(" " + s for s in slurm_users.qos_limits(q))
        limits.append(_sacctmgr(f"modify qos where name={name} set GrpTRES={_tres(cfg, inv, nominal)}{per_user}"))
        if borrow:
            bsettings = [f"GraceTime={grace}", "PreemptMode=requeue"] + (
                [f"Priority={BORROW_TIER}"] if mode == "qos" else []
            )
            adds.append(_sacctmgr(f"add qos {name}-borrow " + " ".join(bsettings)))
            limits.append(
                _sacctmgr(f"modify qos where name={name}-borrow set GrpTRES={_tres(cfg, inv, borrow)}{per_user}")
            )
        mine = [name] + ([f"{name}-borrow"] if borrow else [])
        users = users_of[q.name] = slurm_users.queue_users(q, directory)
        for user in users:
            line = f"add user {shlex.quote(user)} account={name}"
            if mode == "qos":
                line += f" qos={','.join(mine)} defaultqos={name}"
            if q.name == default and user in cfg.admins and user != "root":
                line += " AdminLevel=Administrator"
                admins_added.add(user)
            accts.append(_sacctmgr(line))
        first, later = slurm_users.user_lines(
            q, name, users, classes if mode == "partitions" else {}, cfg.priority_classes
        )
        associations += [_sacctmgr(c) for c in first]
        limits += [_sacctmgr(c) for c in later]
        if q.users is None and q.groups is None and mode == "qos":
            open_qos += mine
        if mode == "partitions":
            partitions += _queue_partitions(cfg, q, name, bool(borrow), grace)
    if mode == "qos":
        partitions.append(_partition(SHARED_PARTITION, OWNER_TIER, None, ["Default=YES", f"GraceTime={grace}"]))
    else:
        adds += _class_qos(cfg, classes)
        open_qos += list(classes.values())
    if open_qos:
        accts.append(_sacctmgr(f"modify account where name=root set QOS+={','.join(sorted(open_qos))}"))
    for admin in sorted(cfg.admins):
        if admin != "root" and admin not in admins_added:
            accts.append(_sacctmgr(f"add user {shlex.quote(admin)} account={queues[default]} AdminLevel=Administrator"))
    script = [
        "set -eu",
        'if [ "${1:-}" != limits ]; then',
        *("  " + line for line in adds + preempts + accts + associations),
        "else",
        *("  " + line for line in limits),
        "fi",
    ]
    gaps = sorted(
        _gaps(cfg, mode, inv)
        + slurm_accounts.gaps(cfg)
        + slurm_users.gaps(cfg.queues, users_of, mode)
        + gpu_sharing.slurm_gaps(cfg)
    )
    return conf + partitions, _gres_conf(inv, cfg), script, gaps


def export(
    cfg: ClusterConfig,
    inv: Inventory,
    config_source: str,
    mode: str = "partitions",
    directory: slurm_users.Directory | None = None,
) -> Export:
    """Build ``slurm.conf`` (a fragment to include), ``gres.conf`` and ``sacctmgr.sh``
    (``directory``: see :func:`build`).

    Raises:
        ExportError: see :func:`build`.
    """
    conf, gres, script, gaps = build(cfg, inv, mode, directory)
    title = f"Slurm configuration (--slurm-mode {mode}) for labgang's queue policy"
    head = header_lines(title, config_source, inv, gaps)

    def commented(lines: list[str]) -> str:
        return "".join(f"# {h}".rstrip() + "\n" for h in lines)

    return Export(
        {
            SLURM_CONF: commented(head) + "\n".join(conf) + "\n",
            GRES_CONF: commented([f"gres.conf for labgang's nodes (source: {config_source}, inventory: {inv.source})"])
            + "\n".join(gres)
            + "\n",
            SACCTMGR: "#!/bin/sh\n"
            + commented(
                [
                    "Accounts and QOS for slurm.conf, against slurmdbd (sacctmgr -i: no prompts), in two steps:",
                    "  sh sacctmgr.sh         QOS and accounts; before slurmctld starts (partitions name these QOS)",
                    "  sh sacctmgr.sh limits  the GrpTRES quotas; once slurmctld has started with slurm.conf",
                    "                         (it registers the gres/gpu TRES with slurmdbd, which sacctmgr needs)",
                ]
            )
            + "\n".join(script)
            + "\n",
        },
        tuple(gaps),
    )
