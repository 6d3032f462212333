"""What the Kueue and Slurm exports share: the inventory summary, name rules, quota splits, gaps.

A :class:`Gap` is one labgang setting the target cannot express, with the nearest
mechanism it has; both exporters return their gaps beside their files and
``labgang export … --check`` prints only those. An :class:`ExportError` is a config
that cannot be exported at all (a name with no valid spelling in the target, two names
that collide once spelled so, a value out of the target's range); the CLI prints its
field and exits 2.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from labgang.agent.inventory import NodeInventory
from labgang.launcher.config.cluster import ClusterConfig, CohortConfig, QueueConfig
from labgang.launcher.host_quota import HOST_RESOURCES
from labgang.launcher.model import GPU, MIG_PREFIX

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
DNS_LABEL_RE = re.compile(rf"^{_DNS_LABEL}$")


class ExportError(ValueError):
    """A configuration that cannot be exported to the target at all.

    Attributes:
        field: the labgang key path at fault (``queues[2].name``, ``priority_classes.high``).
        message: what is wrong and what the target allows.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, order=True)
class Gap:
    """One labgang setting the target cannot express.

    Attributes:
        field: the labgang key path (``queues[0].users``, ``default_grace_s``).
        lost: what the target loses.
        nearest: the target's nearest mechanism (what the export does instead, or what an
            operator would configure by hand).
    """

    field: str
    lost: str
    nearest: str

    def line(self) -> str:
        """``<field>: <lost>; nearest: <nearest>`` on one line."""
        return f"{self.field}: {self.lost}; nearest: {self.nearest}"


@dataclass(frozen=True)
class NodeGpus:
    """One node's allocatable devices, counted.

    Attributes:
        name: the node name (the inventory's hostname).
        gpus: ``(model, count)`` of whole GPUs (not in MIG mode), sorted by model.
        mig: ``(model, profile, count)`` of MIG devices, sorted.
    """

    name: str
    gpus: tuple[tuple[str, int], ...] = ()
    mig: tuple[tuple[str, str, int], ...] = ()

    @classmethod
    def from_inventory(cls, inv: NodeInventory, name: str | None = None) -> NodeGpus:
        """Count :meth:`NodeInventory.allocatable` devices by model and MIG profile."""
        gpus: Counter[str] = Counter()
        mig: Counter[tuple[str, str]] = Counter()
        for dev in inv.allocatable():
            if dev.resource == GPU:
                gpus[dev.model] += 1
            else:
                mig[(dev.model, dev.resource.removeprefix(MIG_PREFIX))] += 1
        return cls(
            name=name or inv.hostname,
            gpus=tuple(sorted(gpus.items())),
            mig=tuple(sorted((m, p, n) for (m, p), n in mig.items())),
        )


@dataclass(frozen=True)
class Inventory:
    """The cluster's nodes as the export sees them (empty when no inventory was available).

    Attributes:
        nodes: one :class:`NodeGpus` per node, sorted by name.
        source: where it came from, for the header (``coordinator``, file names, or
            ``none``).
    """

    nodes: tuple[NodeGpus, ...] = ()
    source: str = "none"

    def gpu_models(self) -> dict[str, int]:
        """Whole GPUs per model over all nodes, sorted by model."""
        out: Counter[str] = Counter()
        for node in self.nodes:
            for model, n in node.gpus:
                out[model] += n
        return dict(sorted(out.items()))

    def mig_profiles(self) -> dict[str, dict[str, int]]:
        """MIG devices per profile, then per parent GPU model, sorted."""
        out: dict[str, Counter[str]] = {}
        for node in self.nodes:
            for model, profile, n in node.mig:
                out.setdefault(profile, Counter())[model] += n
        return {p: dict(sorted(c.items())) for p, c in sorted(out.items())}


@dataclass(frozen=True)
class Export:
    """The result of one export: files by name, and what did not translate.

    Attributes:
        files: file name -> text, in the order they are written.
        gaps: sorted, one per labgang setting the target cannot express.
    """

    files: dict[str, str]
    gaps: tuple[Gap, ...] = field(default_factory=tuple)


def host_quota_gaps(cfg: ClusterConfig, nearest: str) -> list[Gap]:
    """One gap per queue or cohort table that sets a ``cpu``/``memory`` quota (launcher/host_quota.py):
    the exports carry device quotas only. ``nearest``: the target's mechanism, for the operator."""
    gaps: list[Gap] = []
    tables: list[tuple[str, int, QueueConfig | CohortConfig]] = [("queues", i, t) for i, t in enumerate(cfg.queues)]
    tables += [("cohorts", i, t) for i, t in enumerate(cfg.cohorts)]
    for kind, i, t in tables:
        for key in ("nominal", "borrowing_limit", "lending_limit"):
            for res in HOST_RESOURCES:
                if res in getattr(t, key):
                    gaps.append(Gap(f"{kind}[{i}].{key}.{res}", f"the {res} quota is not exported", nearest))
    return gaps


def resource_names(cfg: ClusterConfig, inv: Inventory) -> list[str]:
    """Every labgang resource the config or the inventory mentions: ``gpu`` first, then MIG profiles sorted."""
    names: set[str] = set()
    tables: list[QueueConfig | CohortConfig] = [*cfg.queues, *cfg.cohorts]
    for t in tables:
        names |= set(t.nominal) | set(t.borrowing_limit) | set(t.lending_limit)
    names -= set(HOST_RESOURCES)  # host CPUs and memory are not devices: host_quota_gaps says so
    if inv.gpu_models():
        names.add(GPU)
    names |= {MIG_PREFIX + p for p in inv.mig_profiles()}
    return sorted(names, key=lambda r: (r != GPU, r))


def dns_name(raw: str, where: str, *, label: bool = False) -> str:
    """``raw`` spelled as a Kubernetes object name (lower case, ``_`` and spaces as ``-``).

    Args:
        raw: the labgang name.
        where: its key path, for the error.
        label: True for a DNS-1123 label (namespaces: no dots, at most 63 characters);
            False for a DNS-1123 subdomain (at most 253 characters).

    Raises:
        ExportError: no valid spelling exists (characters other than letters, digits,
            ``-``, ``_``, ``.`` and spaces, or too long).
    """
    name = re.sub(r"[_ ]", "-", raw.strip().lower())
    if label:
        name = name.replace(".", "-")
    limit = 63 if label else 253
    pattern = DNS_LABEL_RE if label else DNS_SUBDOMAIN_RE
    if len(name) > limit or not pattern.match(name):
        kind = "DNS-1123 label" if label else "DNS-1123 subdomain"
        raise ExportError(
            where,
            f"{raw!r} has no valid Kubernetes name; allowed: a {kind} of at most {limit} characters "
            "(letters, digits, '-', and '_' or spaces, which become '-')",
        )
    return name


def unique(names: Iterable[tuple[str, str, str]], kind: str) -> dict[str, str]:
    """Map raw names to target names, refusing two raw names that become one.

    Args:
        names: ``(key path, raw name, target name)`` triples.
        kind: what is named, for the message (``ClusterQueue``, ``partition``).

    Returns:
        raw name -> target name.

    Raises:
        ExportError: two different raw names map to one target name; names the second key path.
    """
    out: dict[str, str] = {}
    owner: dict[str, tuple[str, str]] = {}
    for where, raw, target in names:
        if target in owner and owner[target][1] != raw:
            first_where, first_raw = owner[target]
            raise ExportError(
                where,
                f"{raw!r} and {first_raw!r} ({first_where}) both become {kind} {target!r}; "
                "allowed: names that differ after lower-casing and turning '_' into '-'",
            )
        owner.setdefault(target, (where, raw))
        out[raw] = target
    return out


def split_quota(total: int, weights: Mapping[str, int]) -> dict[str, int]:
    """Split ``total`` devices over keys in proportion to ``weights`` (largest remainder).

    Ties go to the key that sorts first, so the split is deterministic. The parts sum to
    ``total``. With no positive weight everything goes to the first key.

    Raises:
        ValueError: ``weights`` is empty.
    """
    if not weights:
        raise ValueError("split_quota needs at least one key")
    keys = sorted(weights)
    whole = sum(max(0, weights[k]) for k in keys)
    if whole == 0:
        return {k: (total if i == 0 else 0) for i, k in enumerate(keys)}
    base = {k: total * max(0, weights[k]) // whole for k in keys}
    rest = total - sum(base.values())
    by_remainder = sorted(keys, key=lambda k: (-(total * max(0, weights[k]) % whole), k))
    for k in by_remainder[:rest]:
        base[k] += 1
    return base


def cohort_members(cfg: ClusterConfig) -> dict[str, list[QueueConfig]]:
    """Queues per cohort, for every cohort the config names (declared, a queue's ``cohort``, a
    cohort's ``parent``); cohorts sorted, queues in file order."""
    out: dict[str, list[QueueConfig]] = {c.name: [] for c in cfg.cohorts}
    for c in cfg.cohorts:
        if c.parent is not None:
            out.setdefault(c.parent, [])
    for q in cfg.queues:
        if q.cohort is not None:
            out.setdefault(q.cohort, []).append(q)
    return dict(sorted(out.items()))


def cohort_table(cfg: ClusterConfig, name: str) -> CohortConfig | None:
    """The ``[[cohorts]]`` table of cohort ``name``, or None (an implicit root with no quota)."""
    return next((c for c in cfg.cohorts if c.name == name), None)


def child_cohorts(cfg: ClusterConfig, name: str) -> list[str]:
    """Cohorts whose ``parent`` is ``name``, sorted."""
    return sorted(c.name for c in cfg.cohorts if c.parent == name)


def tree_root(cfg: ClusterConfig, cohort: str) -> str:
    """The root cohort of ``cohort``'s tree (itself when it has no parent)."""
    seen = {cohort}
    table = cohort_table(cfg, cohort)
    while table is not None and table.parent is not None and table.parent not in seen:
        cohort = table.parent
        seen.add(cohort)
        table = cohort_table(cfg, cohort)
    return cohort


def tree_peers(cfg: ClusterConfig, queue: QueueConfig) -> list[QueueConfig]:
    """The other queues of ``queue``'s cohort tree (those it borrows from and lends to), file order."""
    if queue.cohort is None:
        return []
    root = tree_root(cfg, queue.cohort)
    return [q for q in cfg.queues if q.name != queue.name and q.cohort is not None and tree_root(cfg, q.cohort) == root]


def lendable(queue: QueueConfig, resource: str) -> int:
    """Devices of ``resource`` that ``queue`` lends to its cohort: its lending limit, or all its nominal quota."""
    nominal = queue.nominal.get(resource, 0)
    return min(nominal, queue.lending_limit.get(resource, nominal))


def subtree_lendable(cfg: ClusterConfig, cohort: str, resource: str) -> int:
    """Devices of ``resource`` the subtree of ``cohort`` lends to the rest of the tree: its own quota
    plus what its queues and child cohorts lend, capped by its lending limit."""
    table = cohort_table(cfg, cohort)
    total = (table.nominal.get(resource, 0) if table else 0) + sum(
        lendable(q, resource) for q in cohort_members(cfg).get(cohort, [])
    )
    total += sum(subtree_lendable(cfg, child, resource) for child in child_cohorts(cfg, cohort))
    if table is not None and resource in table.lending_limit:
        total = min(total, table.lending_limit[resource])
    return total


def cohort_pool(cfg: ClusterConfig, cohort: str, resource: str, *, queue: str = "", child: str = "") -> int:
    """Devices of ``resource`` a member of ``cohort`` (queue ``queue`` or child cohort ``child``) can
    reach beyond its own quota: the cohort's own quota, what its other members lend, and what it
    can take from its parent (capped by its borrowing limit)."""
    table = cohort_table(cfg, cohort)
    total = table.nominal.get(resource, 0) if table else 0
    total += sum(lendable(q, resource) for q in cohort_members(cfg).get(cohort, []) if q.name != queue)
    total += sum(subtree_lendable(cfg, c, resource) for c in child_cohorts(cfg, cohort) if c != child)
    if table is not None and table.parent is not None:
        up = cohort_pool(cfg, table.parent, resource, child=cohort)
        total += min(up, table.borrowing_limit.get(resource, up))
    return total


def borrow_cap(cfg: ClusterConfig, queue: QueueConfig, resource: str) -> int:
    """The most devices of ``resource`` ``queue`` can ever borrow: its borrowing limit, capped by what
    its cohort tree can give it (:func:`cohort_pool`; 0 without a cohort)."""
    if queue.cohort is None:
        return 0
    pool = cohort_pool(cfg, queue.cohort, resource, queue=queue.name)
    limit = queue.borrowing_limit.get(resource)
    return pool if limit is None else min(limit, pool)


def weight_quantity(weight: float, where: str) -> str:
    """A fair-sharing weight as a Kubernetes quantity string (``"1"``, ``"0.5"``).

    Raises:
        ExportError: a weight Kueue refuses (above 0 but at most 1e-9, where it collapses to 0).
    """
    if 0 < weight <= 1e-9:
        raise ExportError(where, f"{weight!r} is too small for Kueue; allowed: 0, or a weight above 1e-9")
    return str(int(weight)) if weight == int(weight) else f"{weight:g}"


def header_lines(title: str, config_source: str, inv: Inventory, gaps: Iterable[Gap]) -> list[str]:
    """Comment lines (without the comment marker) for the top of an exported file."""
    lines = [
        title,
        f"source: {config_source}",
        f"inventory: {inv.source}"
        + ("" if inv.nodes else " (GPU models, MIG profiles and node names unknown: generic names used)"),
        "Generated by `labgang export`; regenerate rather than edit. Mapping: docs/export.md.",
    ]
    gap_list = sorted(gaps)
    if gap_list:
        lines.append("")
        lines.append("Does not translate (labgang field: what is lost; nearest mechanism):")
        lines += [f"- {g.line()}" for g in gap_list]
    return lines
