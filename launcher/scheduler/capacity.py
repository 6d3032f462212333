"""Which devices are free, indexed so placement does not scan every node.

:class:`DeviceBook` is one cycle's mutable view of every device: free, used by a job,
reserved (for a preemptor waiting for its victims, or a starving gang), or unavailable.
:class:`FreeIndex` keeps, for one resource (and optional model filter), each node's free
devices and the nodes bucketed by free count, so "the fullest node holding k devices"
and "the nodes with the most free devices" cost O(distinct counts), not O(nodes).

Devices are referred to by their position in the snapshot (node order, then device order),
which is also the tie-break everywhere: results never depend on set or dict order.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from operator import attrgetter
from typing import Any

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.snapshot import Node, PendingJob, RunningJob, Snapshot
from labgang.launcher.scheduler.topology import TopologyView

UNAVAILABLE = "\0unavailable"
"""Owner tag of a device the snapshot marks as not offered."""


class FreeIndex:
    """Free devices of one resource (optionally one model), per node and bucketed by count.

    Args:
        node_count: number of nodes in the snapshot.
        devices: initial free device positions (any order).
        node_of: device position -> node position.
    """

    def __init__(self, node_count: int, devices: Iterable[int], node_of: list[int]) -> None:
        self._node_of = node_of
        self.free: list[list[int]] = [[] for _ in range(node_count)]
        """Per node position, its free devices in order (read it, never change it: :meth:`add`
        and :meth:`remove` do, and a node's list may be shared with copies)."""
        for d in sorted(devices):
            self.free[node_of[d]].append(d)
        self._own: set[int] | None = None  # nodes whose list only this index holds; None: every node's
        self.buckets: dict[int, list[int]] = {}
        self.total = 0
        for n, devs in enumerate(self.free):
            if devs:
                self.buckets.setdefault(len(devs), []).append(n)
                self.total += len(devs)

    def copy(self) -> FreeIndex:
        """An independent copy (changing one leaves the other as it was).

        The nodes' lists are shared until one side changes a node (copy on write, :meth:`_mine`):
        a cycle's index changes a few nodes of the hundreds it copies."""
        ix = FreeIndex.__new__(FreeIndex)
        ix._node_of = self._node_of
        ix.free = self.free[:]
        ix._own = set()
        self._own = set()  # its lists are shared now: this index copies a node's before changing it
        ix.buckets = {c: nodes[:] for c, nodes in self.buckets.items()}
        ix.total = self.total
        return ix

    def _mine(self, n: int) -> list[int]:
        """Node ``n``'s list of free devices, copied first if another index may hold it."""
        own = self._own
        if own is None or n in own:
            return self.free[n]
        devs = self.free[n] = self.free[n].copy()
        own.add(n)
        return devs

    def add(self, d: int) -> None:
        """Mark device position ``d`` free."""
        n = self._node_of[d]
        own = self._own
        devs = self.free[n] if own is None or n in own else self._mine(n)  # :meth:`_mine`, its hit inlined
        old = len(devs)
        insort(devs, d)
        buckets = self.buckets  # node ``n`` moves from bucket ``old`` to ``old + 1``
        if old:
            bucket = buckets[old]
            del bucket[bisect_left(bucket, n)]
            if not bucket:
                del buckets[old]
        insort(buckets.setdefault(old + 1, []), n)
        self.total += 1

    def remove(self, d: int) -> None:
        """Mark device position ``d`` taken (it must be free in this index)."""
        n = self._node_of[d]
        own = self._own
        devs = self.free[n] if own is None or n in own else self._mine(n)  # :meth:`_mine`, its hit inlined
        old = len(devs)
        del devs[bisect_left(devs, d)]
        buckets = self.buckets  # node ``n`` moves from bucket ``old`` (at least 1) to ``old - 1``
        bucket = buckets[old]
        del bucket[bisect_left(bucket, n)]
        if not bucket:
            del buckets[old]
        if old > 1:
            insort(buckets.setdefault(old - 1, []), n)
        self.total -= 1

    def count(self, n: int) -> int:
        """Free devices on node position ``n``."""
        return len(self.free[n])

    def largest(self) -> int:
        """The most free devices on one node (0 when none)."""
        return max(self.buckets, default=0)

    def fullest_holding(self, need: int, exclude: frozenset[int] | set[int] = frozenset()) -> int | None:
        """The node with the fewest free devices that still has ``need`` (ties: node order).

        Returns:
            A node position, or None when no node (outside ``exclude``) has ``need`` free.
        """
        for c in sorted(k for k in self.buckets if k >= need):
            for n in self.buckets[c]:
                if n not in exclude:
                    return n
        return None

    def most_free(self) -> Iterator[tuple[int, int]]:
        """Yield ``(node, free_count)`` from the most free devices down (ties: node order)."""
        for c in sorted(self.buckets, reverse=True):
            for n in self.buckets[c]:
                yield n, c


class _Layout:
    """The device arrays derived from a snapshot's nodes alone (never mutated once built), and the
    empty-cluster indexes made from them on first use (``empty``, read-only), and the last list of
    unavailable devices (:meth:`unavailable_list`, read-only)."""

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.nodes = nodes
        self.node_names: list[str] = [n.name for n in nodes]
        self.node_cpus: list[int | None] = [n.cpus for n in nodes]
        self.node_memory: list[int | None] = [n.memory for n in nodes]
        self.node_pos: dict[str, int] = {}
        for i, name in enumerate(self.node_names):
            self.node_pos.setdefault(name, i)
        self.uuid: list[str] = []
        self.node_of: list[int] = []
        self.resource: list[str] = []
        self.model: list[str] = []
        self.group: list[str] = []
        self.pos: dict[str, int] = {}
        self.by_resource: dict[str, list[int]] = {}
        for ni, node in enumerate(nodes):
            for dev in node.devices:
                if dev.uuid in self.pos:
                    continue  # a UUID listed twice is one device
                d = len(self.uuid)
                self.pos[dev.uuid] = d
                self.uuid.append(dev.uuid)
                self.node_of.append(ni)
                self.resource.append(dev.resource)
                self.model.append(dev.model.lower())
                self.group.append(dev.group)
                self.by_resource.setdefault(dev.resource, []).append(d)
        self.host_verdicts: dict[Any, Any] = {}  # :func:`.unschedulable.host_never_fits`, per request
        has_topology = any(n.links or any(d.numa for d in n.devices) for n in nodes)
        self.topology: TopologyView | None = TopologyView(nodes, self.pos) if has_topology else None
        self.empty: dict[tuple[str, str | None], FreeIndex] = {}  # :meth:`DeviceBook.all_devices_index`
        self._unavailable: tuple[frozenset[str], list[bool]] | None = None  # :meth:`unavailable_list`

    def unavailable_list(self, uuids: frozenset[str]) -> list[bool]:
        """Per device position, whether its UUID is in ``uuids`` (a snapshot's unavailable devices).
        The last answer is given again while the set is equal (cycles mostly share one): callers
        only read it."""
        last = self._unavailable
        if last is not None and (last[0] is uuids or last[0] == uuids):
            return last[1]
        out = [False] * len(self.uuid)
        for u in uuids:
            d = self.pos.get(u)
            if d is not None:
                out[d] = True
        self._unavailable = (uuids, out)
        return out


_last_layout: tuple[tuple[Node, ...], _Layout] | None = None


def _static_layout(nodes: tuple[Node, ...]) -> _Layout:
    """The layout for ``nodes``, reused while callers pass the very same tuple (the coordinator
    and the simulator keep one nodes tuple until the inventory changes). A pure memo: the
    result depends only on ``nodes``."""
    global _last_layout
    if _last_layout is not None and _last_layout[0] is nodes:
        return _last_layout[1]
    layout = _Layout(nodes)
    _last_layout = (nodes, layout)
    return layout


_ID = attrgetter("id")
_REQUEST = attrgetter("request")
_EXCLUSIVE = attrgetter("exclusive")

_last_ident: tuple[tuple[RunningJob, ...], dict[int, RunningJob]] | None = None
_deltas: tuple[dict[int, RunningJob], dict[int, tuple[dict[int, RunningJob], set[int], set[int]]]] | None = None


RunningChange = tuple[tuple[RunningJob, ...], tuple[RunningJob, ...], list[RunningJob], list[RunningJob]]
"""How a snapshot's running jobs changed: (previous tuple, next tuple, views gone, views new)."""

_change: RunningChange | None = None
"""The last :func:`note_running_change`: the previous running tuple, the next one, and the views
gone and new between them."""

check_changes = False
"""Tests set it: every map and delta made from a :func:`note_running_change` is compared with
the full build (``AssertionError`` on a difference: a change told wrong)."""


def note_running_change(
    before: tuple[RunningJob, ...], after: tuple[RunningJob, ...], gone: list[RunningJob], new: list[RunningJob]
) -> None:
    """Told by whoever builds consecutive snapshots (the simulator's cycle driver) how their
    running jobs changed: ``after`` holds the views of ``before`` (by identity) less ``gone``, plus
    ``new`` (a view in both lists was taken out and put back: it stays). The next
    :func:`running_by_identity` of ``after`` then updates the map of ``before`` for those few
    views instead of a pass over every running job, and :func:`identity_delta` between the two
    maps is known without one. Only a hint: a map it cannot apply is built in full."""
    global _change
    _change = (before, after, gone, new)


def _from_change(running: tuple[RunningJob, ...]) -> dict[int, RunningJob] | None:
    """:func:`running_by_identity` of ``running`` from the last map and :data:`_change` (also
    remembering the delta between the two maps), or None when the change does not apply."""
    global _deltas
    change, last = _change, _last_ident
    if change is None or change[1] is not running or last is None or last[0] is not change[0]:
        return None
    before = last[1]
    if len(before) != len(change[0]):
        return None  # the previous tuple listed a view twice
    gone_ids, new_ids = set(map(id, change[2])), set(map(id, change[3]))
    back = gone_ids & new_ids  # taken out and put back
    gone_ids -= back
    new_ids -= back
    ident = dict(before)
    for job in change[2]:
        if id(job) in gone_ids and ident.pop(id(job), None) is None:
            return None  # not in the previous tuple: a wrong hint
    for job in change[3]:
        if id(job) in new_ids:
            if id(job) in ident:
                return None
            ident[id(job)] = job
    if len(ident) != len(running):
        return None  # listed twice now (the full build says how)
    _deltas = (ident, {id(before): (before, gone_ids, new_ids)})
    return ident


def running_by_identity(running: tuple[RunningJob, ...]) -> dict[int, RunningJob]:
    """``id(job) -> job`` for ``running`` (a snapshot's running jobs); shorter than ``running``
    when one object is listed twice (callers look jobs up: the map's order is not the tuple's
    when it was updated from a :func:`note_running_change`). A memo on the very tuple (kept alive
    here), so the per-cycle memos on the previous snapshot (:func:`_owners`,
    ``state._plain_usage``) share one build; callers must not change the dict."""
    global _last_ident
    if _last_ident is not None and _last_ident[0] is running:
        return _last_ident[1]
    ident = _from_change(running)
    if check_changes and ident is not None:
        assert ident == dict(zip(map(id, running), running, strict=True)), "running change told wrong"
        was = set(_last_ident[1]) if _last_ident is not None else set()
        assert _deltas is not None and _deltas[1][id(_last_ident[1])][1:] == (was - set(ident), set(ident) - was)  # type: ignore[index]
    if ident is None:
        ident = dict(zip(map(id, running), running, strict=True))
    _last_ident = (running, ident)
    return ident


def identity_delta(before: dict[int, RunningJob], after: dict[int, RunningJob]) -> tuple[set[int], set[int]]:
    """The identities in ``before`` only (jobs gone) and in ``after`` only (jobs new), two
    :func:`running_by_identity` dicts; a memo on the very pair, shared like it (callers must not
    change the sets). Every ``before`` asked about with the latest ``after`` is remembered (the
    memos on the previous snapshot may each start from another one)."""
    global _deltas
    if _deltas is None or _deltas[0] is not after:
        _deltas = (after, {})
    known = _deltas[1]
    hit = known.get(id(before))
    if hit is not None and hit[0] is before:
        return hit[1], hit[2]
    # one set of ``before`` and one symmetric difference (the few changed), split by membership:
    # about half the work of two key-view differences
    was = set(before)
    changed = was.symmetric_difference(after)
    gone = changed & was
    new = changed - gone
    known[id(before)] = (before, gone, new)  # ``before`` kept alive: its identity is not reused
    return gone, new


_owner_calls = 0
"""How many times :func:`_owners` has answered (each answer's serial number)."""
_owner_touched: set[int] | None = None
"""The devices whose owner may differ between :func:`_owners`' last answer and the one before it
(None: unknown, the last answer was built anew): what :meth:`DeviceBook.index`'s memo updates."""

_Claims = dict[int, list[RunningJob]]
_last_owners: tuple[_Layout, frozenset[str], dict[int, RunningJob], list[str | None], _Claims, set[int]] | None = None
"""The last :func:`_owners` result, with what it was made from (the running jobs by identity: the
dict keeps them alive, so no identity is reused), each claimed device's claimants and the devices
two or more jobs claim."""


def _owners(layout: _Layout, snapshot: Snapshot, unavailable: list[bool]) -> list[str | None]:
    """Each device's owner in ``snapshot``: the id of the running job that holds it (the last
    in snapshot order if several claim it), else ``UNAVAILABLE`` for a withheld device, else None.

    A pure memo on the previous call (as :func:`_static_layout`): consecutive cycles differ by a
    few running jobs, so when the layout and the unavailable devices are the same objects'
    worth, the previous owners are updated for the jobs gone and the jobs new (compared by
    identity, found with set operations; the previous jobs are kept, so no identity is reused).
    Each claimed device keeps its claimants, so a device several jobs claim (shares of one card)
    gets the last of them in this snapshot's order, as the full build gives it (looked at again on
    every call: the order of the jobs may change from one snapshot to the next).
    """
    global _last_owners, _owner_calls, _owner_touched
    _owner_calls += 1
    _owner_touched = None
    claims: _Claims
    multi: set[int]
    pos = layout.pos
    running = snapshot.running
    ident = running_by_identity(running)
    last = _last_owners
    if last is not None and last[0] is layout and last[1] == snapshot.unavailable and len(ident) == len(running):
        gone, new = identity_delta(last[2], ident)
    else:
        last = None
    if last is not None and len(gone) + len(new) <= len(running) // 2:  # else building anew costs less
        before, owner, claims, multi = last[2], last[3], last[4], last[5]
        touched: list[int] = []  # the devices whose claimants changed
        # a device one job claimed, or none, is settled at once (the usual case: whole devices);
        # one claimed by several (shares of a card, a device listed twice) after, from its claimants
        several: list[int] = []
        for i in gone:
            job = before[i]
            for rp in job.placement:
                for u in rp.devices:
                    d = pos.get(u)
                    if d is not None:
                        held = claims[d]
                        if len(held) == 1 and held[0] is job:  # ``job`` alone: left to nobody
                            del claims[d]
                            owner[d] = UNAVAILABLE if unavailable[d] else None
                        else:
                            claims[d] = [j for j in held if j is not job]
                            several.append(d)
                        touched.append(d)
        for i in new:
            job = ident[i]
            for rp in job.placement:
                for u in rp.devices:
                    d = pos.get(u)
                    if d is not None:
                        claimed = claims.get(d)
                        if claimed is None:  # nobody claimed it: ``job`` alone does
                            claims[d] = [job]
                            owner[d] = job.id
                        else:
                            claimed.append(job)
                            several.append(d)
                        touched.append(d)
        for d in dict.fromkeys(several):  # each once, in the order met
            left = claims.get(d)  # None: its last claimant was settled at once above
            if not left:
                claims.pop(d, None)
                owner[d] = UNAVAILABLE if unavailable[d] else None
                multi.discard(d)
            elif len(left) == 1 or all(j is left[0] for j in left):
                owner[d] = left[0].id
                multi.discard(d)
            else:
                multi.add(d)
        if multi:  # the last claimant in this snapshot's order
            order = dict(zip(map(id, running), range(len(running)), strict=True))
            for d in multi:
                owner[d] = max(claims[d], key=lambda j: order[id(j)]).id
        _last_owners = (layout, snapshot.unavailable, ident, owner, claims, multi)
        _owner_touched = multi.union(touched)
        return owner[:]
    owner = [UNAVAILABLE if u else None for u in unavailable]
    claims = {}
    multi = set()
    for job in running:
        for rp in job.placement:
            for u in rp.devices:
                d = pos.get(u)
                if d is not None:
                    owner[d] = job.id
                    held = claims.setdefault(d, [])
                    if held and held[-1] is not job:
                        multi.add(d)
                    held.append(job)
    kept = len(ident) == len(running)
    _last_owners = (layout, snapshot.unavailable, ident, owner[:], claims, multi) if kept else None
    return owner


memo_requests = True
"""Tests turn it off to build the reference: the running jobs' requests gathered anew each cycle."""

_last_requests: tuple[dict[int, RunningJob], dict[str, JobRequest], int] | None = None
"""The last :func:`_running_requests` answer with the running jobs by identity it was made from
(kept alive here, so no identity is reused)."""


_requests_retired: dict[str, JobRequest] | None = None
"""The map of :data:`_last_requests` once the book it was handed to was retired
(:meth:`DeviceBook.retire`): the next update changes it in place instead of a copy. None while
the map may still be read."""


def _running_requests(running: tuple[RunningJob, ...]) -> tuple[dict[str, JobRequest], int] | None:
    """Running job id -> its request, and how many of them are ``--exclusive``; None when two
    running jobs share an id (the caller then gathers them in snapshot order, the last one
    winning). A pure memo on the previous call (as :func:`_owners`): the previous map is copied
    and the jobs gone and new (by identity) taken out and put in; with distinct ids the map holds
    exactly the running jobs' requests (in another order than snapshot order: callers only look
    requests up). Callers must not change the map. Once the book it was handed to is retired
    (:data:`_requests_retired`), the next update changes the map in place instead of a copy."""
    global _last_requests, _requests_retired
    retired, _requests_retired = _requests_retired, None  # handed out again below, or dropped
    ident = running_by_identity(running)
    last = _last_requests if memo_requests else None
    if last is not None and len(ident) == len(running):
        # the last map changed in place when its book was retired (read by nobody), else copied
        before, requests, exclusive = last[0], last[1] if retired is last[1] else dict(last[1]), last[2]
        gone, new = identity_delta(before, ident)
        for i in gone:
            job = before[i]
            exclusive -= job.request.exclusive
            del requests[job.id]
        for i in new:
            job = ident[i]
            exclusive += job.request.exclusive
            requests[job.id] = job.request
    else:
        requests = dict(zip(map(_ID, running), map(_REQUEST, running), strict=True))
        exclusive = sum(map(_EXCLUSIVE, requests.values()))
    if len(requests) != len(running) or len(ident) != len(running):  # an id listed twice
        _last_requests = None
        return None
    if memo_requests:
        _last_requests = (ident, requests, exclusive)
    return requests, exclusive


lazy_requests = True
"""Off: every book builds its :attr:`DeviceBook.requests` at once (tests compare a replay both ways)."""

memo_free_index = True
"""Off: every book's free indexes built over every device (the memo neither read nor kept)."""

_free_memo: dict[tuple[str, str | None], tuple[_Layout, int, FreeIndex]] = {}
"""Per (resource, model): the layout and the :func:`_owners` answer (its serial) that the last
untouched book's index was made from, and that index as it was then (never handed out)."""


class DeviceBook:
    """Every device of a snapshot with its owner, plus lazily built :class:`FreeIndex` es.

    Owners: None (free), a running job id, ``UNAVAILABLE``. ``reserved_for`` marks devices
    held for a job that waits (a preemptor or a starving gang): they are not free for
    anyone else even while unowned. ``generation`` increases whenever a device becomes
    free, so callers can cache "does not fit" answers between increases.

    Args:
        snapshot: the cycle's snapshot; running jobs' devices are taken, ``unavailable`` ones
            are withheld.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        static = self.static = _static_layout(snapshot.nodes)
        self._snapshot = snapshot
        self.node_names: list[str] = static.node_names
        self.node_cpus: list[int | None] = static.node_cpus
        self.node_memory: list[int | None] = static.node_memory
        self.node_pos: dict[str, int] = static.node_pos
        self.uuid: list[str] = static.uuid
        self.node_of: list[int] = static.node_of
        self.resource: list[str] = static.resource
        self.model: list[str] = static.model
        self.group: list[str] = static.group
        self.pos: dict[str, int] = static.pos
        self.by_resource: dict[str, list[int]] = static.by_resource
        self.topology: TopologyView | None = static.topology
        self.reserved_for: list[str | None] = [None] * len(self.uuid)
        self.unavailable: list[bool] = static.unavailable_list(snapshot.unavailable)  # read only
        self.owner: list[str | None] = _owners(static, snapshot, self.unavailable)
        self._owner_serial, self._owner_touched = _owner_calls, _owner_touched
        self._indexes: dict[tuple[str, str | None], FreeIndex] = {}
        # every job that may own or reserve devices, for its host CPUs and memory (:mod:`.hostres`):
        # :attr:`requests`, built when first read (most cycles never read it: no host resources)
        self._requests: dict[str, JobRequest] | None = None
        self._requests_of: tuple[dict[str, JobRequest], tuple[PendingJob, ...]] | None = None
        running = _running_requests(snapshot.running)
        if (
            lazy_requests
            and running is not None
            and (running[1] > 0 or not any(map(_EXCLUSIVE, map(_REQUEST, snapshot.pending))))
        ):
            # whether any job is --exclusive is known without the map: a running one, or none at all
            self.exclusive_known = running[1] > 0
            self._requests_of = (running[0], snapshot.pending)
        else:
            self.exclusive_known = self._build_requests(snapshot.pending, running)
        self.changes = 0  # bumped by every change of owners or reservations (caches key on it)
        self.host_use_cache: tuple[int, list[Any]] | None = None  # :func:`.hostres.node_use`

    def retire(self) -> None:
        """Say that nothing reads this book again (:meth:`.state.CycleState.retire`): the running
        jobs' request map the memo handed it, when not read yet (:attr:`requests` builds its own
        from it on first read), is then changed in place into the next snapshot's instead of copied."""
        global _requests_retired
        if self._requests_of is not None and _last_requests is not None and self._requests_of[0] is _last_requests[1]:
            _requests_retired = _last_requests[1]
            self._requests_of = None  # (the map is another snapshot's from now on)

    @property
    def requests(self) -> dict[str, JobRequest]:
        """Job id -> request of every running and pending job of the snapshot (a running job's
        request where an id is both), for host CPUs and memory (:mod:`.hostres`); callers may put
        in and take out entries (:mod:`.groups` does while it places groups). Built on first read
        from the running jobs' map of this cycle (never changed after it is handed out:
        :func:`_running_requests` copies it before the next cycle's changes)."""
        made = self._requests
        if made is None:
            assert self._requests_of is not None
            running_map, pending = self._requests_of
            self._build_requests(pending, (running_map, 0))  # exclusive_known is known already
            made = self._requests
            assert made is not None
        return made

    def _build_requests(
        self, pending: tuple[PendingJob, ...], running: tuple[dict[str, JobRequest], int] | None
    ) -> bool:
        """Build :attr:`requests` from the pending jobs and ``running`` (the running jobs' map and how
        many are ``--exclusive``; None: every running job gathered anew). Returns whether any job of
        the map is ``--exclusive`` (what :attr:`exclusive_known` says)."""
        snapshot_running = self._snapshot.running
        self._requests = dict(zip(map(_ID, pending), map(_REQUEST, pending), strict=True))
        if running is None:
            self._requests.update(zip(map(_ID, snapshot_running), map(_REQUEST, snapshot_running), strict=True))
            return any(map(_EXCLUSIVE, self._requests.values()))
        # the running jobs' map copied (a C-level copy) and the few pending jobs put in where
        # no running job has their id (a running job's request wins, as in the update above)
        by_pending, self._requests = self._requests, dict(running[0])
        for job_id, request in by_pending.items():
            self._requests.setdefault(job_id, request)
        return running[1] > 0 or any(map(_EXCLUSIVE, map(self._requests.__getitem__, by_pending)))

    # --- indexes -----------------------------------------------------------------------------

    def matches(self, d: int, res: str, model: str | None) -> bool:
        """True when device ``d`` is of resource ``res`` and its model contains ``model``."""
        return self.resource[d] == res and (model is None or model in self.model[d])

    def is_free(self, d: int) -> bool:
        """True when nobody owns or reserves device ``d``."""
        return self.owner[d] is None and self.reserved_for[d] is None

    def index(self, res: str, model: str | None = None) -> FreeIndex:
        """The free-device index for ``res`` (devices whose model contains ``model``, lowercase)."""
        key = (res, model)
        ix = self._indexes.get(key)
        if ix is None:
            ix = self._indexes[key] = self._free_index(res, model)
        return ix

    def _free_index(self, res: str, model: str | None) -> FreeIndex:
        """A new :class:`FreeIndex` of the devices free now (see :meth:`index`); from the
        previous cycle's first index of ``(res, model)`` when this book is still as the
        snapshot gave it (nothing taken, released or reserved yet) and its owners were updated
        from the owners that index was made from: the devices whose owner may have changed
        are looked at again, the rest stay as they were (the free devices of a device list
        are the same either way, so the index is the one a full build gives)."""
        owner, reserved, models = self.owner, self.reserved_for, self.model
        key = (res, model)
        memo = _free_memo.get(key) if memo_free_index and self.changes == 0 else None
        if memo is not None and memo[0] is self.static:
            base, serial = memo[2], memo[1]
            touched = self._owner_touched
            if serial == self._owner_serial - 1 and touched is not None:
                resource, node_of = self.resource, self.node_of
                for d in touched:
                    if resource[d] != res or not (model is None or model in models[d]):
                        continue
                    free = owner[d] is None  # nothing is reserved yet: ``changes`` is 0
                    devs = base.free[node_of[d]]
                    if free != (d in devs):
                        if free:
                            base.add(d)
                        else:
                            base.remove(d)
                _free_memo[key] = (self.static, self._owner_serial, base)
                return base.copy()
        devs = [
            d
            for d in self.by_resource.get(res, ())
            if owner[d] is None and reserved[d] is None and (model is None or model in models[d])
        ]
        ix = FreeIndex(len(self.node_names), devs, self.node_of)
        if memo_free_index and self.changes == 0:
            _free_memo[key] = (self.static, self._owner_serial, ix.copy())
        return ix

    def all_devices_index(self, res: str, model: str | None, *, skip_unavailable: bool) -> FreeIndex:
        """An index over every device of ``res`` as if nothing ran (optionally minus
        unavailable ones): the "empty cluster" used for unschedulable checks and starvation.

        With ``skip_unavailable`` it is a fresh index the caller may change; without, it depends
        on the nodes alone and is one index shared by every cycle on the same nodes tuple (the
        layout's), which callers only read (``feasible``, ``largest``, ``total``).
        """
        if not skip_unavailable:
            shared = self.static.empty.get((res, model))
            if shared is None:
                shared = self.static.empty[(res, model)] = self._all_devices(res, model, skip_unavailable=False)
            return shared
        return self._all_devices(res, model, skip_unavailable=True)

    def _all_devices(self, res: str, model: str | None, *, skip_unavailable: bool) -> FreeIndex:
        devs = [
            d
            for d in self.by_resource.get(res, ())
            if (model is None or model in self.model[d]) and not (skip_unavailable and self.unavailable[d])
        ]
        return FreeIndex(len(self.node_names), devs, self.node_of)

    def _index_add(self, d: int) -> None:
        res = self.resource[d]
        for (r, m), ix in self._indexes.items():
            if r == res and (m is None or m in self.model[d]):
                ix.add(d)

    def _index_remove(self, d: int) -> None:
        res = self.resource[d]
        for (r, m), ix in self._indexes.items():
            if r == res and (m is None or m in self.model[d]):
                ix.remove(d)

    # --- changes -----------------------------------------------------------------------------

    def take(self, devices: Iterable[int], owner: str) -> None:
        """Give free (or ``owner``-reserved) devices to ``owner``."""
        self.changes += 1
        owners, reserved = self.owner, self.reserved_for
        for d in devices:
            was_free = owners[d] is None and reserved[d] is None  # :meth:`is_free`
            owners[d] = owner
            if reserved[d] == owner:
                reserved[d] = None
            elif was_free:
                self._index_remove(d)

    def release(self, devices: Iterable[int], owner: str) -> list[int]:
        """Free the devices ``owner`` holds (unavailable ones stay withheld).

        Returns:
            The positions actually released (to undo with :meth:`take`).
        """
        self.changes += 1
        done = []
        owners, reserved, unavailable = self.owner, self.reserved_for, self.unavailable
        for d in devices:
            if owners[d] != owner:
                continue
            if unavailable[d]:
                owners[d] = UNAVAILABLE
            else:
                owners[d] = None
                if reserved[d] is None:  # free now (:meth:`is_free`)
                    self._index_add(d)
            done.append(d)
        return done

    def retake(self, devices: Iterable[int], owner: str) -> None:
        """Give devices back to ``owner`` after :meth:`release` (undo of a simulated removal)."""
        self.changes += 1
        owners, reserved = self.owner, self.reserved_for
        for d in devices:
            if owners[d] is None and reserved[d] is None:  # :meth:`is_free`
                self._index_remove(d)
            owners[d] = owner

    def reserve(self, devices: Iterable[int], holder: str) -> list[int]:
        """Reserve devices for ``holder``; devices already reserved by someone else are skipped.

        Returns:
            The positions reserved by this call (to undo with :meth:`unreserve`).
        """
        self.changes += 1
        done = []
        for d in devices:
            if self.reserved_for[d] is not None:
                continue
            if self.is_free(d):
                self._index_remove(d)
            self.reserved_for[d] = holder
            done.append(d)
        return done

    def unreserve(self, devices: Iterable[int], holder: str) -> None:
        """Drop ``holder``'s reservation on ``devices``."""
        self.changes += 1
        for d in devices:
            if self.reserved_for[d] != holder:
                continue
            self.reserved_for[d] = None
            if self.is_free(d):
                self._index_add(d)
