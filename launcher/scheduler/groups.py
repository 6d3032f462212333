"""All or nothing across the groups of a job (``docs/job-groups.md``).

A job of groups (``JobRequest.groups``) is one gang to the rest of the scheduler: its quota is
the sum over its groups (``JobRequest.total``), it is one victim, and :func:`place_groups` finds
a node set for every group at once or returns None. Groups are placed most constrained first
(colocated sets, then a required topology or node count, then the most devices), each on the
devices the groups before it left, and the result lists the ranks in group order (global rank
order). A group of ``per_worker == 0`` ranks (an MPI launcher) takes no device: its ranks go to
a node the job's other groups use, else the first node offering anything (and, with host
requests, with room for them). ``colocate`` sets put all their groups' ranks on one node.

An elastic job of groups (some group has ``min_workers``) starts when every group reaches its
minimum: :func:`group_sizes` yields the job from full size down to every group at its floor.

Every change to the device book made while trying is undone before returning.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Iterator
from dataclasses import replace
from typing import Generic, TypeVar

from labgang.launcher.model import GroupRequest, JobRequest
from labgang.launcher.scheduler.capacity import DeviceBook, FreeIndex
from labgang.launcher.scheduler.decisions import PendingReason, ReasonCode
from labgang.launcher.scheduler.hostres import GROUP_PROBE, capped_index, host_reason, node_use, rank_cap
from labgang.launcher.scheduler.placement import place, topology_reason
from labgang.launcher.scheduler.reasons import needed

T = TypeVar("T")

RawPlacement = list[tuple[int, list[int]]]
"""``[(node position, [device positions]), ...]`` per rank (as :func:`.placement.place` returns it)."""

_PROBE = GROUP_PROBE
"""Owner tag of devices a group holds while the later groups of its job are tried."""

_live_nodes: weakref.WeakKeyDictionary[DeviceBook, list[int]] = weakref.WeakKeyDictionary()


def describe_groups(req: JobRequest) -> str:
    """``"groups launcher 1 x 0 + worker 4 x 2 gpu"``: each group's ranks x devices per rank."""
    parts = [f"{g.name} {g.request.workers} x {g.request.per_worker}" for g in req.groups]
    return "groups " + " + ".join(parts) + f" {req.resource}"


def rank_shapes(req: JobRequest) -> list[JobRequest]:
    """Each global rank's own shape, in rank order: its group's request (``req`` itself for
    every rank of a one-group job)."""
    if not req.groups:
        return [req] * req.workers
    return [g.request for g in req.groups for _ in range(g.request.workers)]


def units(req: JobRequest) -> list[list[int]]:
    """Group positions in the order they are placed: each colocated set is one unit (its groups
    in job order), the others alone; most constrained and largest first."""
    names = [g.name for g in req.groups]
    parent = list(range(len(names)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for together in req.colocate:
        ids = [names.index(n) for n in together if n in names]
        for i in ids[1:]:
            parent[root(i)] = root(ids[0])
    by_root: dict[int, list[int]] = {}
    for i in range(len(names)):
        by_root.setdefault(root(i), []).append(i)

    def weight(unit: list[int]) -> tuple[int, int, int, int, int]:
        reqs = [req.groups[i].request for i in unit]
        hosted = len(unit) == 1 and reqs[0].per_worker == 0 and reqs[0].host  # after the job's device nodes
        constrained = any(r.topology is not None or r.nodes is not None for r in reqs)
        return (hosted, -(len(unit) > 1), -constrained, -sum(r.total for r in reqs), unit[0])

    return sorted(by_root.values(), key=weight)


def group_sizes(req: JobRequest) -> Iterator[JobRequest]:
    """``req`` at full size, then (when some group is elastic) every elastic group one rank
    smaller at a time, each stopping at its floor, down to every group at its minimum."""
    yield req
    if not req.elastic:
        return
    span = max(g.request.workers - (g.request.min_workers or g.request.workers) for g in req.groups)
    for k in range(1, span + 1):
        groups = tuple(_shrunk(g, k) for g in req.groups)
        yield replace(req, groups=groups, workers=sum(g.request.workers for g in groups))


def _shrunk(g: GroupRequest, k: int) -> GroupRequest:
    r = g.request
    if not r.elastic:
        return g
    size = max(r.min_workers or r.workers, r.workers - k)
    return GroupRequest(g.name, r.at_size(size) if size < r.workers else r)


ONE_GROUP: tuple[tuple[JobRequest, ...], tuple[tuple[int, ...], ...]] = ((), ())
"""The :func:`group_shape` of every one-group job."""


def group_shape(req: JobRequest) -> tuple[tuple[JobRequest, ...], tuple[tuple[int, ...], ...]]:
    """A job of groups without its group names: ``(each group's request in job order, each
    colocated set as group positions)``. Two jobs of one shape fit or fail alike on any device
    book (placement reads names only to tag what a group holds while the others are tried), and
    their pending reasons differ only in the names (:data:`reason_template`, :func:`render`).
    ``((), ())`` for a one-group job."""
    if not req.groups:
        return ONE_GROUP
    names = [g.name for g in req.groups]
    together = tuple(tuple(names.index(n) for n in s if n in names) for s in req.colocate)
    return tuple(g.request for g in req.groups), together


class ByRequest(Generic[T]):
    """A memo of a pure function of a request, by the request object's identity: a pending job's
    request is one immutable object from cycle to cycle, and hashing a job of groups's request walks
    every group. It holds each request it answered (so no id is reused while kept) and forgets them
    all once it holds ``limit``.

    Args:
        fn: the function, of a :class:`JobRequest` only.
        limit: how many requests it keeps at most.
    """

    __slots__ = ("_fn", "_limit", "_memo")

    def __init__(self, fn: Callable[[JobRequest], T], limit: int = 100_000) -> None:
        self._fn = fn
        self._limit = limit
        self._memo: dict[int, tuple[JobRequest, T]] = {}

    def __call__(self, req: JobRequest) -> T:
        hit = self._memo.get(id(req))
        if hit is not None and hit[0] is req:
            return hit[1]
        if len(self._memo) >= self._limit:
            self._memo.clear()
        value = self._fn(req)
        self._memo[id(req)] = (req, value)
        return value


def group_class(req: JobRequest) -> Hashable:
    """What of a job's groups its scheduling class (``nominate.Entry.cls``) holds: for a *plain*
    job of groups (:func:`plain_size`) only ``("plain groups", devices per rank, device ranks,
    any rank without a device)``, as such a job fits exactly where one gang of its device ranks
    would and counts the same quota whatever its cut into groups; for any other job of groups its
    :func:`group_shape`; ``()`` for a one-group job. A reason that describes the groups holds only
    for jobs of one shape (:func:`names_groups`)."""
    return _group_class(req) if req.groups else ()


def _of_groups(req: JobRequest) -> Hashable:
    plain = plain_size(req)
    if plain is not None:
        return "plain groups", plain[0], plain[1], plain[2] > 0
    return group_shape(req)


_group_class: ByRequest[Hashable] = ByRequest(_of_groups)
plain_gang_of: ByRequest[JobRequest | None] = ByRequest(lambda req: plain_gang(req))
""":func:`plain_gang`, kept per request object."""
_needed: ByRequest[str] = ByRequest(needed)


_NAME_MARK = "\x01"
"""Brackets a group's position in a reason template (never in a group name: a name is a letter,
then letters, digits, ``_`` or ``-``; ``jobgroups.py``)."""

NEED_MARK = "\x02"
"""Stands in a reason template for what the job needs as a quota reason says it
(:func:`.reasons.needed`: the sum and each group's share of it)."""


def _reason_template(req: JobRequest) -> JobRequest:
    """``req`` with each group named by a placeholder for its position: the request whose pending
    reason, once :func:`render` puts a job's names in, is that job's reason, for every job of
    ``req``'s :func:`group_shape` (so a cycle computes and keeps one reason per shape)."""
    if not req.groups:
        return req
    names = [g.name for g in req.groups]
    marks = [f"{_NAME_MARK}{i}{_NAME_MARK}" for i in range(len(names))]
    colocate = tuple(tuple(marks[names.index(n)] if n in names else n for n in s) for s in req.colocate)
    groups = tuple(GroupRequest(m, g.request) for m, g in zip(marks, req.groups, strict=True))
    return replace(req, groups=groups, colocate=colocate)


def is_template(reason: PendingReason) -> bool:
    """True when ``reason`` has placeholders for :func:`render` to fill."""
    text = reason.message
    return NEED_MARK in text or _NAME_MARK in text


reason_template: ByRequest[JobRequest] = ByRequest(_reason_template)
""":func:`_reason_template`, kept per request object."""


def names_groups(reason: PendingReason) -> bool:
    """True when a template's message describes the groups one by one (so it holds only for jobs of
    the :func:`group_shape` it was built for); False when the job's own words are only its need."""
    return _NAME_MARK in reason.message


def render(reason: PendingReason, req: JobRequest) -> PendingReason:
    """``reason`` (a template: built for :data:`reason_template` of a job of ``req``'s shape, or with
    :data:`NEED_MARK` for its need) in ``req``'s own words: its group names and its need; ``reason``
    itself when it has no placeholder (any reason not built from a template)."""
    text = reason.message
    if NEED_MARK in text:
        text = text.replace(NEED_MARK, _needed(req))
    if _NAME_MARK in text:
        for i, g in enumerate(req.groups):
            text = text.replace(f"{_NAME_MARK}{i}{_NAME_MARK}", g.name)
    if text is reason.message:
        return reason
    return PendingReason(reason.code, text, reason.no_preemption)


def plain_size(req: JobRequest) -> tuple[int, int, int] | None:
    """``(devices per rank, device ranks, ranks with no device)`` of a *plain* job of groups, or
    None for any other request.

    Plain: every device group has the same devices per rank and GPU model, no ``nodes``,
    ``topology`` or host request, no ``colocate``; groups with no device ask for no host
    resources either. Such a job
    fits exactly where one gang of all its device ranks would (each group's ranks go anywhere a
    rank of its size fits, the ranks with no device anywhere live), whatever its group names and
    however its ranks are cut into groups: the key under which a cycle shares what it learned
    about one such job (a victim search that failed, ``cycle.py``) with the others.
    """
    if not req.groups or req.colocate:
        return None
    per = ranks = bare = 0
    model: str | None = None
    for g in req.groups:
        r = g.request
        if r.nodes is not None or r.topology is not None or r.host or r.elastic:
            return None
        if r.per_worker:
            if per and (r.per_worker != per or r.gpu_model != model):
                return None
            per, model = r.per_worker, r.gpu_model
            ranks += r.workers
        else:
            bare += r.workers
    if not per:
        return None
    return per, ranks, bare


def plain_gang(req: JobRequest) -> JobRequest | None:
    """The one gang a plain job of groups (:func:`plain_size`) with a device for every rank
    places, counts and is preempted for exactly like: its ranks x devices per rank, of its
    resource and GPU model. None for any other request (a job with ranks that have no device
    keeps its own search key: they may count host quota a gang of its device ranks does not)."""
    plain = plain_size(req)
    if plain is None or plain[2]:
        return None
    first = next(g.request for g in req.groups if g.request.per_worker)
    return JobRequest(workers=plain[1], per_worker=plain[0], resource=first.resource, gpu_model=first.gpu_model)


def place_groups(book: DeviceBook, req: JobRequest) -> RawPlacement | None:
    """A placement for every rank of every group of ``req``, in global rank order, or None.

    Args:
        book: the cycle's device book (left as it was found).
        req: a job of groups (``req.groups`` not empty).
    """
    if _short(book, req, "") is not None:
        return None
    out, _reason = _place(book, req, None)
    return out


def _short(book: DeviceBook, req: JobRequest, describe: str) -> PendingReason | None:
    """Why the job cannot fit whatever its placement (fewer free devices of a kind than its groups
    need together, or a group's rank bigger than any node's free devices): the cheap refusal
    tried before any group is placed. None when nothing is short."""
    need: dict[tuple[str, str | None], int] = {}
    for g in req.groups:
        r = g.request
        if r.per_worker:
            key = (r.resource, r.gpu_model.lower() if r.gpu_model else None)
            need[key] = need.get(key, 0) + r.total
    for g in req.groups:
        r = g.request
        if r.per_worker:
            key = (r.resource, r.gpu_model.lower() if r.gpu_model else None)
            ix = book.index(*key)
            if ix.total < need[key]:
                return PendingReason(
                    ReasonCode.NO_CAPACITY,
                    f"{ix.total} {r.resource} free; the job's groups need {need[key]} together ({describe})",
                )
            if r.per_worker > ix.largest():
                return _one_reason(book, g)
    return None


def _place(book: DeviceBook, req: JobRequest, explain: str | None) -> tuple[RawPlacement | None, PendingReason | None]:
    """The placement, or None and (when ``explain`` describes the job) why, naming the group
    (or colocated set) that did not fit with the groups placed before it holding their room."""
    per_group: dict[int, RawPlacement] = {}
    probes: list[tuple[str, list[int]]] = []
    used: list[int] = []
    try:
        for unit in units(req):
            got = _place_unit(book, req, unit, used, probes)
            if got is None:
                return None, None if explain is None else _unit_reason(book, req, unit, explain)
            per_group.update(got)
    finally:
        for owner, devs in reversed(probes):
            book.release(devs, owner)
            book.requests.pop(owner, None)
    return [rank for i in range(len(req.groups)) for rank in per_group[i]], None


def _hold(book: DeviceBook, g: GroupRequest, raw: RawPlacement, probes: list[tuple[str, list[int]]]) -> None:
    owner = _PROBE + g.name
    devs = [d for _, ds in raw for d in ds]
    book.requests[owner] = g.request  # its host CPUs and memory count for the groups after it
    book.take(devs, owner)
    probes.append((owner, devs))


def _place_unit(
    book: DeviceBook, req: JobRequest, unit: list[int], used: list[int], probes: list[tuple[str, list[int]]]
) -> dict[int, RawPlacement] | None:
    if len(unit) == 1:
        g = req.groups[unit[0]]
        raw = _place_group(book, g.request, used, None)
        if raw is None:
            return None
        _hold(book, g, raw, probes)
        _note_nodes(used, raw)
        return {unit[0]: raw}
    for n in _candidate_nodes(book, req, unit, used):
        mark = len(probes)
        got: dict[int, RawPlacement] = {}
        for i in unit:
            g = req.groups[i]
            raw = _place_group(book, g.request, [n], n)
            if raw is None:
                break
            _hold(book, g, raw, probes)
            got[i] = raw
        else:
            _note_nodes(used, [(n, [])])
            return got
        for owner, devs in reversed(probes[mark:]):
            book.release(devs, owner)
            book.requests.pop(owner, None)
        del probes[mark:]
    return None


def _note_nodes(used: list[int], raw: RawPlacement) -> None:
    for n, _ in raw:
        if n not in used:
            used.append(n)


def _candidate_nodes(book: DeviceBook, req: JobRequest, unit: list[int], used: list[int]) -> list[int]:
    """Nodes a colocated set could go to: those with enough free devices for its largest
    device group (fullest first), or, with no device group, the job's nodes then every live one."""
    device_groups = [req.groups[i].request for i in unit if req.groups[i].request.per_worker > 0]
    if not device_groups:
        return used + [n for n in live_nodes(book) if n not in used]
    biggest = max(device_groups, key=lambda r: r.total)
    ix = book.index(biggest.resource, biggest.gpu_model.lower() if biggest.gpu_model else None)
    need = sum(r.total for r in device_groups if r.resource == biggest.resource)
    return [n for c in sorted(k for k in ix.buckets if k >= need) for n in ix.buckets[c]]


def live_nodes(book: DeviceBook) -> list[int]:
    """Node positions offering anything: a node with no device, or with one not withheld."""
    cached = _live_nodes.get(book)
    if cached is None:
        withheld = [True] * len(book.node_names)
        has_device = [False] * len(book.node_names)
        for d, n in enumerate(book.node_of):
            has_device[n] = True
            if not book.unavailable[d]:
                withheld[n] = False
        cached = _live_nodes[book] = [n for n in range(len(withheld)) if not (has_device[n] and withheld[n])]
    return cached


def _place_group(book: DeviceBook, r: JobRequest, used: list[int], only: int | None) -> RawPlacement | None:
    """One group's ranks on the book's free devices (on node ``only`` when given)."""
    if r.per_worker == 0:
        return _place_deviceless(book, r, used, only)
    ix = book.index(r.resource, r.gpu_model.lower() if r.gpu_model else None)
    if only is not None:
        ix = FreeIndex(len(book.node_names), ix.free[only], book.node_of)
    capped = capped_index(book, ix, r)
    return place(book, ix, r.workers, r.per_worker, r.nodes if only is None else None, r.topology, capped)


def _place_deviceless(book: DeviceBook, r: JobRequest, used: list[int], only: int | None) -> RawPlacement | None:
    """Ranks with no device: spread evenly over ``r.nodes`` nodes (one when unset), the job's
    own nodes first, each node with host room for its share. Ranks asking for host CPUs or memory
    or whole nodes go only to nodes where the job's other groups hold devices: a running job's
    host use is found through its devices (``hostres._add_group_use``)."""
    count = 1 if only is not None else (r.nodes or 1)
    base, extra = divmod(r.workers, count)
    shares = [base + 1] * extra + [base] * (count - extra)
    if only is not None:
        candidates = [only]
    elif r.host:
        candidates = used
    else:
        candidates = used + [n for n in live_nodes(book) if n not in used]
    uses = node_use(book) if r.host or book.exclusive_known else None
    out: RawPlacement = []
    for n in candidates:
        if len(out) == r.workers:
            break
        share = shares[len({m for m, _ in out})]
        if uses is not None and rank_cap(book, uses[n], n, r, share) < share:
            continue
        out.extend((n, []) for _ in range(share))
    return out if len(out) == r.workers else None


def capacity_reason(book: DeviceBook, req: JobRequest, describe: str) -> PendingReason | None:
    """Why a job of groups has no placement now, naming the group (or colocated set) that does
    not fit: ``"group worker (4 x 2 gpu): 6 gpu free, largest node has 3; ..."``. None when it
    fits (then something else, such as a reservation, keeps it waiting)."""
    short = _short(book, req, describe)
    if short is not None:
        return short
    _raw, reason = _place(book, req, describe)
    return reason


def _unit_reason(book: DeviceBook, req: JobRequest, unit: list[int], describe: str) -> PendingReason:
    """Why ``unit`` does not fit now (the groups placed before it holding their room)."""
    if len(unit) > 1:
        names = ", ".join(req.groups[i].name for i in unit)
        return PendingReason(
            ReasonCode.FRAGMENTED,
            f"groups {names} must share one node (--colocate) and no node has room for all of them now; "
            f"job needs {describe}",
        )
    return _one_reason(book, req.groups[unit[0]])


def _one_reason(book: DeviceBook, g: GroupRequest) -> PendingReason:
    r = g.request
    what = f"{r.workers} x {r.per_worker} {r.resource}"
    head = f"group {g.name} ({what})"
    if r.per_worker == 0:
        return PendingReason(
            ReasonCode.HOST_RESOURCES, f"{head}: no node has host room for its {r.workers} rank(s) now"
        )
    ix = book.index(r.resource, r.gpu_model.lower() if r.gpu_model else None)
    reason: PendingReason | None
    if r.topology is not None and ix.total >= r.total:
        reason = topology_reason(book, ix, r, what)
    else:
        reason = host_reason(book, ix, r, what) if ix.total >= r.total else None
        if reason is None:
            code = ReasonCode.NO_CAPACITY if ix.total < r.total else ReasonCode.FRAGMENTED
            reason = PendingReason(
                code, f"{ix.total} {r.resource} free, largest node has {ix.largest()}; the group needs {what}"
            )
    return replace(reason, message=f"{head}: {reason.message}")
