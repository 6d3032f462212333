"""Shares of one GPU (``--shards``, ``--mps``): who sits on which shared card, where a new share goes,
and what a share costs in quota (docs/sharing.md).

A shared card is a full GPU that holds one or more *sharers*: jobs with ``JobRequest.shared``. In the
cycle's :class:`~.capacity.DeviceBook` such a card is owned by :data:`SHARED` (never free for whole-GPU
jobs); this module keeps its sharers. A card is in one mode at a time: ``shard`` (time-sliced, up to the
node's ``shards_per_gpu`` shards) or ``mps`` (up to 100 % of its SMs, and one user at a time: one MPS
server per user).

Rules:

- **Trust**: a job of queue A may join a card whose sharers are all *compatible*: same queue, or two
  queues that both name each other in ``share_with``; a queue whose ``share_gpus`` is ``user`` (on
  either side) also needs the same user; ``none`` never shares. MPS cards need the same user besides.
- **Best fit**: a share goes to the compatible shared card with the least room that still holds it
  (ties: device order), else to one whole free card of the fullest node that allows the mode, so
  whole cards and whole nodes stay free for gangs.
- **Quota**: a shard is ``1/shards_per_gpu`` gpu, ``--mps P`` is ``P/100`` gpu, counted exactly in
  whole *units* of ``1/lcm(shards_per_gpu, 100)`` gpu (integers, no rounding). The quota book counts
  whole devices. A card whose sharers are all of one queue (*held alone*) is that queue's whole card:
  no other queue can use what is left of it, so it is charged 1 gpu however little of it the shares
  take. A queue's shares on cards *mixed* with other queues' (``share_with``) are summed and rounded
  up: ``charge = cards held alone + ceil(units on mixed cards / denom)``, and the quota book's usage
  is whole GPUs plus that charge. This keeps the nominal guarantee (a queue gets its nominal quota
  back, by reclaim if need be): three users' ``--mps 10`` jobs hold three cards (one MPS server per
  user) and are charged 3 gpu, not ``ceil(0.3) = 1``. Packed cards cost as before: four one-shard jobs
  on one card are 1 gpu. A share's charge therefore depends on where it lands (joining a card its
  queue holds alone adds 0, opening a card adds 1), and taking a share off frees quota only when it
  leaves a card its queue held alone empty, or lowers the rounded-up sum on mixed cards; a share
  joining (or leaving) a mixed card can change the other queue's charge too (its card stops, or
  starts, being held alone). A cohort sees each queue's mixed shares rounded up, so two queues with a
  quarter GPU each on one card take 2 of their cohort's pool.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from labgang.launcher.model import GPU, GpuSharing, JobRequest, NodeGpuSharing, QueueSpec
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.decisions import PendingReason, ReasonCode
from labgang.launcher.scheduler.snapshot import RunningJob

SHARED = "\0shared"
"""Owner tag, in the device book, of a card that holds sharers."""

RawPlacement = list[tuple[int, list[int]]]


def share_kind(req: JobRequest) -> str:
    """``"shard"`` or ``"mps"`` for a share request (``req.shared``)."""
    return "mps" if req.mps else "shard"


def share_units(req: JobRequest, shards_per_gpu: int) -> Fraction:
    """The part of one GPU ``req`` takes: ``shards/shards_per_gpu`` or ``mps/100`` (0 for whole devices)."""
    if req.mps:
        return Fraction(req.mps, 100)
    if req.shards:
        return Fraction(req.shards, shards_per_gpu) if shards_per_gpu > 0 else Fraction(1)
    return Fraction(0)


def describe_share(req: JobRequest, shards_per_gpu: int) -> str:
    """``"1 shard of a gpu (1/4 gpu)"``, ``"mps 50% of a gpu (1/2 gpu)"``, with the memory budget if any."""
    units = share_units(req, shards_per_gpu)
    head = f"mps {req.mps}% of a gpu" if req.mps else f"{req.shards} shard{'s' if req.shards != 1 else ''} of a gpu"
    text = f"{head} ({units} gpu)"
    if req.gpu_mem:
        text += f", gpu memory {req.gpu_mem // (1 << 20)} MiB"
    return text


def may_share(a: QueueSpec, user_a: str, b: QueueSpec, user_b: str) -> bool:
    """The trust rule: may a job of queue ``a`` (by ``user_a``) sit on one card with a job of ``b``?"""
    if a.share_gpus == "none" or b.share_gpus == "none":
        return False
    if a.name != b.name and not (b.name in a.share_with and a.name in b.share_with):
        return False
    return not ("user" in (a.share_gpus, b.share_gpus) and user_a != user_b)


def trust_key(spec: QueueSpec, specs: Mapping[str, QueueSpec], req: JobRequest, user: str) -> Hashable:
    """What decides where share ``req`` of a job of ``spec`` by ``user`` may go, for grouping jobs that
    fit or fail alike: the share asked for, and the user only where the trust rule reads it (MPS,
    or ``share_gpus = "user"`` on the queue or on a queue it shares with). None for whole devices."""
    if not req.shared:
        return None
    return (req.shards, req.mps, trust_user(spec, specs, req, user))


def trust_user(spec: QueueSpec, specs: Mapping[str, QueueSpec], req: JobRequest, user: str) -> str | None:
    """``user`` where the trust rule reads it for share ``req`` of a job of ``spec`` (see
    :func:`reads_user`), else None."""
    return user if reads_user(spec, specs, bool(req.mps)) else None


def reads_user(spec: QueueSpec, specs: Mapping[str, QueueSpec], mps: bool) -> bool:
    """True when the trust rule reads the user for a share (``mps``: an MPS share) of a job of
    ``spec``: MPS, or ``share_gpus = "user"`` on the queue or on a queue it shares with."""
    partners = (specs.get(o) for o in spec.share_with)
    return mps or spec.share_gpus == "user" or any(p is not None and p.share_gpus == "user" for p in partners)


Signature = frozenset[tuple[str, str]]
"""The (queue, user) pairs of a card's sharers: all the trust rule reads of a card."""


def _card_key(job: RunningJob) -> str:
    """The card running share ``job`` sits on, for the quota side: its placement's device UUID (a
    share is one rank on one card), or a key of its own when its placement names none (then its
    card is counted held alone)."""
    for rp in job.placement:
        for u in rp.devices:
            return u
    return "\0job:" + job.id


@dataclass(slots=True)
class Sharer:
    """One job on a shared card: its id, queue, user and the part of the card it takes (units)."""

    job_id: str
    queue: str
    user: str
    units: int


class ShareBook:
    """The cycle's shared cards and each queue's exact share use, in units of ``1/denom`` gpu
    (``denom = lcm(shards_per_gpu, 100)``: a whole card is ``denom`` units).

    Args:
        sharing: the ``[sharing]`` table.
        queues: every queue's spec (the trust rule reads ``share_gpus`` / ``share_with``).
        running: running jobs (terminating ones included), deduplicated; the shared ones are read.
    """

    def __init__(self, sharing: GpuSharing, queues: Iterable[QueueSpec], running: Iterable[RunningJob]) -> None:
        self.sharing = sharing
        self.denom = math.lcm(sharing.shards_per_gpu or 1, 100)
        self.specs: dict[str, QueueSpec] = {}
        for q in queues:
            self.specs.setdefault(q.name, q)
        # whether two queues' shares may meet on a card (``share_with``): only then can taking a share
        # off raise a queue's charge (a mixed card left to one queue counts whole for it)
        self.mixing = any(spec.share_with for spec in self.specs.values())
        self.queue_use: dict[str, int] = {}
        self.jobs: dict[str, RunningJob] = {}
        # the quota side (module doc): each card's units per queue, keyed by the card's UUID (known
        # from a running share's placement before the device book is attached, and for a card the
        # book no longer lists); each share's card key; per queue, the cards it holds alone and its
        # units on cards mixed with other queues'
        self.comp: dict[str, dict[str, int]] = {}
        self.key_of: dict[str, str] = {}
        self.alone: dict[str, int] = {}
        self.mixed: dict[str, int] = {}
        for job in running:
            if job.request.shared:
                self.jobs[job.id] = job
                units = self.units(job.request)
                self.queue_use[job.queue] = self.queue_use.get(job.queue, 0) + units
                key = self.key_of[job.id] = _card_key(job)
                self._add(key, job.queue, units)
        self.version = 0
        """Bumped by every change of the shared cards (the placement memo and the cycle's failed-search
        stamps of a queue with ``share_with`` key on it)."""
        self._placed: tuple[Hashable, RawPlacement | None, int, int] | None = None  # see :meth:`place`
        self._placed_users: list[str] = []
        self.cards: dict[int, list[Sharer]] = {}
        self.used: dict[int, int] = {}
        self.kind: dict[int, str] = {}
        self.count: dict[str, int] = {"shard": 0, "mps": 0}  # shared cards per mode
        self.card_of: dict[str, int] = {}
        self.devices: DeviceBook | None = None
        # shared cards with room, by mode, the queue and user of their first sharer (the *anchor*: a job
        # can only join cards whose anchor it may share with) and room left, each list in device order
        self._open: dict[str, dict[str, dict[str, dict[int, list[int]]]]] = {"shard": {}, "mps": {}}
        self._open_at: dict[int, tuple[str, str, str, int]] = {}
        self._sig: dict[int, Signature] = {}  # each shared card's (queue, user) pairs
        self._dirty: dict[int, None] = {}  # cards whose place in the open-card index is out of date
        self._left_at: dict[str, tuple[int, int]] = {}  # a share taken off (leave): its card and place there
        self._rooms: dict[str, dict[int, int]] = {"shard": {}, "mps": {}}  # open cards per mode and room
        self._servers: dict[str, dict[int, int]] = {}  # open MPS cards per first sharer's user and room
        # who the trust rule may have decided for (see the cycle's verdicts across users): placements that
        # met a card with room that every user of the queue may be trusted on, or that joined a card,
        # are counted in ``trust_reads`` (the answer may differ for any user); the users whose own
        # cards with room a placement met are logged in ``trust_users`` (the answer may differ for them)
        self.trust_reads = 0
        self.trust_users: list[str] = []
        self._trusts: dict[tuple[Signature, str, str, str], bool] = {}  # the trust rule is fixed for a cycle
        self._allows: dict[tuple[int, str], bool] = {}
        self._whole: dict[tuple[str, str | None], tuple[int, int]] = {}  # free whole cards allowing a mode
        self._notes: dict[tuple[str, int, int, int, int, int, int], str] = {}  # quota_note's answers

    def units(self, req: JobRequest) -> int:
        """The part of one card ``req`` takes, in units (its quota charge before rounding)."""
        if req.mps:
            return req.mps * self.denom // 100
        spg = self.sharing.shards_per_gpu
        return req.shards * self.denom // spg if spg > 0 else self.denom

    def _whole_gpus(self, units: int) -> int:
        return -(-units // self.denom)

    def charged(self, queue: str) -> int:
        """Whole GPUs ``queue``'s shares count in its quota usage now: the cards it holds alone, plus its
        units on cards mixed with other queues' rounded up (module doc)."""
        return self.alone.get(queue, 0) + self._whole_gpus(self.mixed.get(queue, 0))

    def initial_usage(self) -> dict[str, int]:
        """Each queue's share charge in whole GPUs (:meth:`charged`): what its running shares put in
        the quota book."""
        return {q: n for q in self.queue_use if (n := self.charged(q))}

    def _add(self, key: str, queue: str, units: int) -> list[tuple[str, int]]:
        """Count ``units`` of ``queue`` on card ``key``. Returns ``[(queue, whole GPUs its charge grows
        by)]`` for each queue whose charge changed (a card another queue held alone becomes mixed:
        that queue's charge may shrink)."""
        comp = self.comp.get(key)
        if comp is None:  # a card opened: held alone
            self.comp[key] = {queue: units}
            self.alone[queue] = self.alone.get(queue, 0) + 1
            return [(queue, 1)]
        if queue in comp and len(comp) == 1:  # joins a card its queue holds alone: no charge
            comp[queue] += units
            return []
        out = []
        if len(comp) == 1:  # another queue's card held alone becomes mixed
            ((p, pu),) = comp.items()
            before = self.charged(p)
            self.alone[p] -= 1
            self.mixed[p] = self.mixed.get(p, 0) + pu
            if self.charged(p) != before:
                out.append((p, self.charged(p) - before))
        before = self.charged(queue)
        comp[queue] = comp.get(queue, 0) + units
        self.mixed[queue] = self.mixed.get(queue, 0) + units
        if self.charged(queue) != before:
            out.append((queue, self.charged(queue) - before))
        return out

    def _sub(self, key: str, queue: str, units: int) -> list[tuple[str, int]]:
        """Undo :meth:`_add` of ``units`` of ``queue`` on card ``key``; the changed charges as it says
        (a mixed card left with one queue's sharers becomes held alone: that queue's may grow)."""
        comp = self.comp[key]
        left = comp[queue] - units
        if len(comp) == 1:
            if left:
                comp[queue] = left
                return []
            del self.comp[key]  # its queue's last sharer: the card it held alone is free
            self.alone[queue] -= 1
            return [(queue, -1)]
        out = []
        before = self.charged(queue)
        self.mixed[queue] -= units
        if left:
            comp[queue] = left
        else:
            del comp[queue]
        if self.charged(queue) != before:
            out.append((queue, self.charged(queue) - before))
        if len(comp) == 1:  # the other queue now holds the card alone
            ((p, pu),) = comp.items()
            before = self.charged(p)
            self.mixed[p] -= pu
            self.alone[p] = self.alone.get(p, 0) + 1
            if self.charged(p) != before:
                out.append((p, self.charged(p) - before))
        return out

    def card_alone(self, d: int) -> str | None:
        """The queue that holds shared card ``d`` alone (all its sharers are of that queue), else None."""
        assert self.devices is not None
        comp = self.comp.get(self.devices.uuid[d])
        if comp is None or len(comp) != 1:
            return None
        return next(iter(comp))

    def attach(self, devices: DeviceBook) -> None:
        """Mark the cards the running shares hold as :data:`SHARED` in ``devices`` (before any index is built)."""
        self.devices = devices
        for job in self.jobs.values():  # as _join, the open-card index built once per card below
            d = self._card(job)
            if d is not None:
                kind = share_kind(job.request)
                s = Sharer(job.id, job.queue, job.user, self.units(job.request))
                if d not in self.cards:
                    self.count[kind] += 1
                self.cards.setdefault(d, []).append(s)
                self.used[d] = self.used.get(d, 0) + s.units
                self.kind[d] = kind
                self.card_of[s.job_id] = d
                devices.owner[d] = SHARED
        for d in self.cards:
            self._reopen(d)

    def _card(self, job: RunningJob) -> int | None:
        assert self.devices is not None
        for rp in job.placement:
            for u in rp.devices:
                d = self.devices.pos.get(u)
                if d is not None:
                    return d
        return None

    def _join(self, d: int, s: Sharer, kind: str) -> None:
        self.version += 1
        if d not in self.cards:
            self.count[kind] += 1
        self.cards.setdefault(d, []).append(s)
        self.used[d] = self.used.get(d, 0) + s.units
        self.kind[d] = kind
        self.card_of[s.job_id] = d
        self._reopen(d)

    def _reopen(self, d: int) -> None:
        """Card ``d``'s sharers changed: its signature is made again when read, and its place in the
        open-card index is brought up to date before the index is next read (:meth:`_flush`), so a
        victim search that takes sharers off and puts them back does not move it to and fro."""
        self._sig.pop(d, None)
        self._dirty[d] = None

    def _flush(self) -> None:
        """Bring the open-card index up to date for the cards changed since it was last read."""
        if self._dirty:
            for d in self._dirty:
                self._index(d)
            self._dirty.clear()

    def _index(self, d: int) -> None:
        sharers = self.cards.get(d)
        key = None
        if sharers and self.used[d] < self.denom:
            key = (self.kind[d], sharers[0].queue, sharers[0].user, self.denom - self.used[d])
        at = self._open_at.get(d)
        if at == key:
            return
        if at is not None:
            del self._open_at[d]
            kind, queue, user, room = at
            by_user = self._open[kind][queue]
            rooms = by_user[user]
            cards = rooms[room]
            del cards[bisect_left(cards, d)]
            self._rooms[kind][room] -= 1
            if kind == "mps":
                served = self._servers[user]
                served[room] -= 1
                if not served[room]:
                    del served[room]
                    if not served:
                        del self._servers[user]
            if not cards:
                del rooms[room]
                if not rooms:
                    del by_user[user]
                    if not by_user:
                        del self._open[kind][queue]
        if key is not None:
            rooms = self._open[key[0]].setdefault(key[1], {}).setdefault(key[2], {})
            insort(rooms.setdefault(key[3], []), d)
            self._open_at[d] = key
            self._rooms[key[0]][key[3]] = self._rooms[key[0]].get(key[3], 0) + 1
            if key[0] == "mps":
                served = self._servers.setdefault(key[2], {})
                served[key[3]] = served.get(key[3], 0) + 1

    # --- quota --------------------------------------------------------------------------------

    def charge(self, queue: str, req: JobRequest, user: str | None) -> int:
        """Whole GPUs ``queue``'s quota usage grows by if share ``req`` of ``user`` went where
        :meth:`place` puts it now: 0 joining a card ``queue`` holds alone, 1 opening a card (also when
        no card holds it now: it would need one), and on a card mixed with other queues' (or held
        alone by one of them) what ``queue``'s rounded-up units on mixed cards grow by. ``user`` None:
        only a whole free card is offered, as :meth:`place` with no queue."""
        raw = self.place(req, None if user is None else queue, user or "")
        if raw is None:
            return 1
        comp = self.comp.get(self._uuid(raw[0][1][0]))
        if comp is None:
            return 1
        if queue in comp and len(comp) == 1:
            return 0
        m = self.mixed.get(queue, 0)
        return self._whole_gpus(m + self.units(req)) - self._whole_gpus(m)

    place_unmixed = False
    """On only to check that :meth:`lowered` answering None at once where no queue shares cards with
    another changes no decision (it then places the share as where queues do)."""

    def lowered(self, queue: str, req: JobRequest, user: str | None) -> tuple[str, int] | None:
        """Where share ``req`` of ``queue`` by ``user`` would join a card another queue holds alone
        (where :meth:`place` puts it now; ``user`` None as in :meth:`charge`): that queue and the whole
        GPUs its charge changes by, when they are fewer (its card becomes mixed: its units there join
        its rounded-up sum on mixed cards); else None. Without ``share_with`` on any queue
        (:attr:`mixing` False) a share joins only cards of its own queue: None without placing it
        (:attr:`place_unmixed` off: placed all the same)."""
        if not self.mixing and not self.place_unmixed:
            return None
        raw = self.place(req, None if user is None else queue, user or "")
        if raw is None:
            return None
        comp = self.comp.get(self._uuid(raw[0][1][0]))
        if comp is None or len(comp) != 1 or queue in comp:
            return None
        ((p, pu),) = comp.items()
        delta = self.alone[p] - 1 + self._whole_gpus(self.mixed.get(p, 0) + pu) - self.charged(p)
        return (p, delta) if delta else None

    def _uuid(self, d: int) -> str:
        assert self.devices is not None
        return self.devices.uuid[d]

    remember_placement = True
    """:meth:`place` remembers its last answer (off only to check that it changes no decision)."""

    def place(self, req: JobRequest, queue: str | None, user: str) -> RawPlacement | None:
        """Where a share goes now: ``[(node, [card])]``, or None (:meth:`_place_now`), remembered for
        one request until the shared cards or the device book change: a share's quota check
        (:meth:`charge`) and its placement ask alike. A remembered answer logs again whom the
        placement read (``trust_reads``, ``trust_users``), as :meth:`_place_now` would.

        Args:
            req: a share request (``req.shared``).
            queue: the job's queue; None when unknown (then only a whole free card, which trusts nobody).
            user: the job's user.
        """
        if not self.remember_placement:
            return self._place_now(req, queue, user)
        assert self.devices is not None
        key = (self.version, self.devices.changes, queue, user, req.shards, req.mps, req.gpu_model)
        memo = self._placed
        if memo is not None and memo[0] == key:
            self.trust_reads += memo[2]
            if memo[3]:
                self.trust_users.extend(self._placed_users)
            raw = memo[1]
            return None if raw is None else [(n, list(ds)) for n, ds in raw]
        reads, logged = self.trust_reads, len(self.trust_users)
        raw = self._place_now(req, queue, user)
        self._placed_users = self.trust_users[logged:]
        self._placed = (key, raw, self.trust_reads - reads, len(self._placed_users))
        return raw

    memo_quota_notes = True
    """:meth:`quota_note` keeps its answers per what it reads (the queue's cards held alone, units on mixed
    cards and units in use, and the share asked); off only to check that it changes no reason."""

    def quota_note(self, queue: str, req: JobRequest) -> str:
        """:meth:`_quota_note`, kept per what it reads: a cycle's failed shares of one queue mostly ask alike."""
        key = (
            queue,
            self.alone.get(queue, 0),
            self.mixed.get(queue, 0),
            self.queue_use.get(queue, 0),
            req.shards,
            req.mps,
            req.gpu_mem,
        )
        if self.memo_quota_notes:
            got = self._notes.get(key)
            if got is not None:
                return got
        note = self._notes[key] = self._quota_note(queue, req)
        return note

    def _quota_note(self, queue: str, req: JobRequest) -> str:
        """For a quota reason, what share ``req`` is and what ``queue``'s shares are charged and why:
        ``"the job is 1 shard of a gpu (1/4 gpu); team's shares are charged 3 gpu: 3 cards held alone
        by team's shares: 3 gpu (they use 3/4 gpu; a card a queue's shares hold alone counts whole:
        no other queue can use the rest of it)"``, naming the units on cards mixed with other queues'
        (rounded up) where there are some."""
        alone, mixed = self.alone.get(queue, 0), self.mixed.get(queue, 0)
        used = Fraction(self.queue_use.get(queue, 0), self.denom)
        parts = []
        if alone:
            parts.append(f"{alone} card{'s' if alone != 1 else ''} held alone by {queue}'s shares: {alone} gpu")
        if mixed:
            parts.append(
                f"{Fraction(mixed, self.denom)} gpu on cards shared with other queues: "
                f"{self._whole_gpus(mixed)} gpu (rounded up)"
            )
        head = f"the job is {describe_share(req, self.sharing.shards_per_gpu)}; "
        rule = "a card a queue's shares hold alone counts whole: no other queue can use the rest of it"
        if not parts:
            return head + f"{queue} runs no share, and a share that opens a card is charged 1 gpu ({rule})"
        return (
            head
            + f"{queue}'s shares are charged {self.charged(queue)} gpu: {', '.join(parts)} "
            + f"(they use {used} gpu; {rule})"
        )

    # --- placement ----------------------------------------------------------------------------

    def _every_node_allows(self, kind: str) -> bool:
        key = (-1, kind)
        got = self._allows.get(key)
        if got is None:
            assert self.devices is not None
            if not self.sharing.nodes:  # no per-node overrides (all() of no nodes is True)
                got = self._allows[key] = self._uniform(kind) or not self.devices.node_names
                return got
            got = self._allows[key] = all(self.allows(n, kind) for n in range(len(self.devices.node_names)))
        return got

    def _uniform(self, kind: str) -> bool:
        """Whether every node allows ``kind`` when no node overrides ``[sharing]`` (the usual case)."""
        return self.sharing.mps if kind == "mps" else self.sharing.shards_per_gpu > 0

    def allows(self, node: int, kind: str) -> bool:
        """True when node position ``node`` allows shares of ``kind``."""
        assert self.devices is not None
        if not self.sharing.nodes:  # no per-node overrides: the cluster-wide values
            return self._uniform(kind)
        got = self._allows.get((node, kind))
        if got is None:
            ns = self.sharing.node(self.devices.node_names[node])
            got = self._allows[(node, kind)] = ns.mps if kind == "mps" else ns.shards_per_gpu > 0
        return got

    def joinable(self, d: int, queue: str, user: str, kind: str) -> bool:
        """True when a job of ``queue`` by ``user`` may join shared card ``d`` (mode and trust rule)."""
        if self.kind.get(d) != kind:
            return False
        return self._trusted(self._signature(d), queue, user, kind)

    def _signature(self, d: int) -> Signature:
        """The (queue, user) pairs of card ``d``'s sharers (empty for a card not shared), kept until
        its sharers change."""
        sig = self._sig.get(d)
        if sig is None:
            sig = self._sig[d] = frozenset((s.queue, s.user) for s in self.cards.get(d, ()))
        return sig

    def _anchors(self, kind: str, queue: str, user: str) -> list[dict[int, list[int]]]:
        """The open cards (by room) whose first sharer a job of ``queue`` by ``user`` may share with."""
        spec = self.specs.get(queue)
        if spec is None or spec.share_gpus == "none":
            return []
        out = []
        by_queue = self._open[kind]
        for q in (queue, *spec.share_with):
            by_user = by_queue.get(q)
            other = self.specs.get(q)
            if not by_user or other is None or (q != queue and queue not in other.share_with):
                continue
            if kind == "mps" or "user" in (spec.share_gpus, other.share_gpus):
                rooms = by_user.get(user)
                if rooms:
                    out.append(rooms)
            else:
                out.extend(by_user.values())
        return out

    def _note_readers(self, kind: str, queue: str | None, units: int) -> None:
        """Record whom a placement of ``units`` of ``kind`` for ``queue`` may answer differently from
        another user's: the users with an open card of that mode and room whose first sharer ``queue``
        may share with, where the trust rule reads the user (:meth:`_anchors`; each user's own cards),
        logged in ``trust_users``; everyone (``trust_reads``) where a card with room trusts the queue
        whatever the user, or the queue is unknown. A superset of who could join: the model, held and
        reserved cards and the card's later sharers are not read here."""
        if queue is None:  # no trust rule read: counted as anyone's, as before
            self.trust_reads += 1
            return
        spec = self.specs.get(queue)
        if spec is None or spec.share_gpus == "none":
            return  # never joins a card: a whole free card, for any user alike
        by_queue = self._open[kind]
        log = self.trust_users
        for q in (queue, *spec.share_with):
            by_user = by_queue.get(q)
            other = self.specs.get(q)
            if not by_user or other is None or (q != queue and queue not in other.share_with):
                continue
            if kind == "mps" or "user" in (spec.share_gpus, other.share_gpus):
                log.extend(u for u, rooms in by_user.items() if any(r >= units for r in rooms))
            elif any(r >= units for rooms in by_user.values() for r in rooms):
                self.trust_reads += 1
                return

    def note_placement(self, kind: str, queue: str | None, units: int) -> None:
        """Log whom a placement of ``units`` of ``kind`` for ``queue`` reads now (:meth:`place` does,
        first): when some open card of the mode has room for it, the trust rule may decide
        (:meth:`_note_readers`)."""
        self._flush()
        if any(n and room >= units for room, n in self._rooms[kind].items()):
            self._note_readers(kind, queue, units)  # a card with room exists: the trust rule may decide

    def note_card(self, d: int, kind: str, queue: str, units: int) -> None:
        """Log what a placement of ``units`` of ``kind`` for ``queue`` (see :meth:`note_placement`)
        reads of card ``d`` alone, as it is now: its first sharer's user (or anyone, where the trust
        rule reads no user) when ``d`` is an open card of the mode with room for it whose first
        sharer ``queue`` may share with. After a sharer of ``d`` was taken off, a placement logs
        what one before it logged, and this (the other cards are as they were): a victim search
        logs its placements' readers without placing (``preemption.end_first``)."""
        sharers = self.cards.get(d)
        if not sharers or self.kind[d] != kind or self.denom - self.used[d] < units:
            return
        spec = self.specs.get(queue)
        anchor = sharers[0]
        q = anchor.queue
        if spec is None or spec.share_gpus == "none" or (q != queue and q not in spec.share_with):
            return
        other = self.specs.get(q)
        if other is None or (q != queue and queue not in other.share_with):
            return
        if kind == "mps" or "user" in (spec.share_gpus, other.share_gpus):
            self.trust_users.append(anchor.user)
        else:
            self.trust_reads += 1

    def may_join(self, d: int, req: JobRequest, queue: str, user: str) -> bool:
        """True when share ``req`` of ``queue`` by ``user`` may join shared card ``d`` as it is now: the
        test :meth:`_place_now` makes of each open card (its mode, room for ``req``, a first sharer
        :meth:`_anchors` offers, not unavailable or reserved, the model asked, the trust rule over
        every sharer). Logs nothing. False for a card that is not shared. A victim search asks it of
        the one card a victim left (``preemption.skip_unjoinable_cards``): where it is False and no
        charge changed, the placement after that victim joins no card that the one before could not."""
        sharers = self.cards.get(d)
        if not sharers:
            return False
        kind = share_kind(req)
        if self.kind[d] != kind or self.denom - self.used[d] < self.units(req):
            return False
        spec = self.specs.get(queue)
        anchor = sharers[0]
        q = anchor.queue
        other = self.specs.get(q)
        if spec is None or spec.share_gpus == "none" or other is None:
            return False
        if q != queue and (q not in spec.share_with or queue not in other.share_with):
            return False
        if (kind == "mps" or "user" in (spec.share_gpus, other.share_gpus)) and anchor.user != user:
            return False
        devices = self.devices
        assert devices is not None
        if devices.unavailable[d] or devices.reserved_for[d] is not None:
            return False
        model = req.gpu_model.lower() if req.gpu_model else None
        if model is not None and model not in devices.model[d]:
            return False
        return self._trusted(self._signature(d), queue, user, kind)

    def forget(self, mark: tuple[int, int]) -> None:
        """Drop what was logged since ``mark`` (a :meth:`mark`): as if those placements never read."""
        self.trust_reads = mark[0]
        del self.trust_users[mark[1] :]

    def readers(self, mark: tuple[int, int]) -> frozenset[str] | None:
        """Whom the placements since ``mark`` (a :meth:`mark`) may have answered differently: the users
        logged, or None when it may be anyone."""
        if self.trust_reads != mark[0]:
            return None
        return frozenset(self.trust_users[mark[1] :])

    def mark(self, fresh: bool = False) -> tuple[int, int]:
        """A point to ask :meth:`readers` from; ``fresh``: no earlier mark is asked about any more
        (the log is emptied)."""
        if fresh:
            self.trust_users.clear()
        return (self.trust_reads, len(self.trust_users))

    def _trusted(self, sig: Signature, queue: str, user: str, kind: str) -> bool:
        """The trust rule for a card whose sharers are ``sig`` ((queue, user) pairs), remembered."""
        key = (sig, queue, user, kind)
        got = self._trusts.get(key)
        if got is None:
            spec = self.specs.get(queue)
            got = spec is not None and all(
                (other := self.specs.get(q)) is not None
                and may_share(spec, user, other, u)
                and (kind != "mps" or u == user)
                for q, u in sig
            )
            self._trusts[key] = got
        return got

    def _place_now(self, req: JobRequest, queue: str | None, user: str) -> RawPlacement | None:
        """Where a share goes now: ``[(node, [card])]``, or None.

        Args:
            req: a share request (``req.shared``).
            queue: the job's queue; None when unknown (then only a whole free card, which trusts nobody).
            user: the job's user.
        """
        devices = self.devices
        assert devices is not None
        self._flush()
        kind, units = share_kind(req), self.units(req)
        model = req.gpu_model.lower() if req.gpu_model else None
        self.note_placement(kind, queue, units)
        if queue is not None:
            best: tuple[int, int] | None = None  # (room, card): the least room, then device order
            for rooms in self._anchors(kind, queue, user):
                for room in sorted(r for r in rooms if r >= units):
                    if best is not None and room > best[0]:
                        break
                    found = None
                    for d in rooms[room]:
                        if best is not None and room == best[0] and d > best[1]:
                            break
                        if devices.unavailable[d] or devices.reserved_for[d] is not None:
                            continue
                        if (model is None or model in devices.model[d]) and self._trusted(
                            self._signature(d), queue, user, kind
                        ):
                            found = d
                            break
                    if found is not None:
                        best = (room, found)
                        break
            if best is not None:
                self.trust_reads += 1  # joined a card: another user might get another card, or none
                return [(devices.node_of[best[1]], [best[1]])]
        ix = devices.index(GPU, model)
        for c in sorted(ix.buckets):
            for n in ix.buckets[c]:
                if self.allows(n, kind):
                    return [(n, [ix.free[n][0]])]
        return None

    def take(self, job_id: str, queue: str, user: str, req: JobRequest, d: int) -> list[tuple[str, int]]:
        """Put ``job_id`` on card ``d`` (a free card becomes shared).

        Returns:
            ``[(queue, whole GPUs its quota usage grows by)]`` for each queue whose charge changed: the
            job's own (see :meth:`charge`), and another queue whose card held alone becomes mixed.
        """
        assert self.devices is not None
        if d not in self.cards:
            self.devices.take([d], SHARED)
        units = self.units(req)
        self._join(d, Sharer(job_id, queue, user, units), share_kind(req))
        self.queue_use[queue] = self.queue_use.get(queue, 0) + units
        key = self.key_of[job_id] = self.devices.uuid[d]
        return self._add(key, queue, units)

    def leave(self, job: RunningJob) -> tuple[list[tuple[str, int]], Sharer | None, bool]:
        """Take running share ``job`` off its card (a simulated removal).

        Returns:
            ``([(queue, whole GPUs its quota usage shrinks by)], the sharer record or None, whether the
            card was freed)``: the job's queue where it left a card it held alone empty (or its
            rounded-up units on mixed cards went down), and another queue left alone on a mixed card
            (its usage grows: a negative number).
        """
        # inlined (_count, _reopen): a victim search takes shares off and puts them back thousands
        # of times a cycle
        devices = self.devices
        assert devices is not None
        job_id = job.id
        d = self.card_of.pop(job_id, None)
        if d is None:
            units = self.units(job.request)
        else:
            sharers = self.cards[d]
            i = 0
            for s in sharers:
                if s.job_id == job_id:
                    break
                i += 1
            units = s.units
        q = job.queue
        self.version += 1
        self.queue_use[q] -= units
        delta = [(p, -n) for p, n in self._sub(self.key_of[job_id], q, units)]
        if d is None:
            return delta, None, False
        del sharers[i]
        self._left_at[job_id] = (d, i)
        self.used[d] -= units
        freed = False
        if not sharers:
            self.count[self.kind[d]] -= 1
            del self.cards[d], self.used[d], self.kind[d]
            freed = bool(devices.release([d], SHARED))
        self._sig.pop(d, None)
        self._dirty[d] = None
        return delta, s, freed

    def back(self, job: RunningJob, s: Sharer | None, freed: bool) -> list[tuple[str, int]]:
        """Undo :meth:`leave`: the sharer back in its place on its card. Returns ``[(queue, whole GPUs
        its usage grows by again)]``, what :meth:`leave` said with the signs turned."""
        devices = self.devices
        assert devices is not None
        units = self.units(job.request) if s is None else s.units
        q = job.queue
        self.version += 1
        self.queue_use[q] = self.queue_use.get(q, 0) + units
        delta = self._add(self.key_of[job.id], q, units)
        if s is not None:
            d, i = self._left_at.pop(job.id)
            if freed:
                devices.retake([d], SHARED)
            sharers = self.cards.get(d)
            if sharers is None:
                self.count["mps" if job.request.mps else "shard"] += 1
                self.cards[d] = [s]
                self.used[d] = s.units
                self.kind[d] = "mps" if job.request.mps else "shard"
            else:
                sharers.insert(i, s)
                self.used[d] += s.units
            self.card_of[s.job_id] = d
            self._sig.pop(d, None)
            self._dirty[d] = None
        return delta

    # --- reasons ------------------------------------------------------------------------------

    def sharers_of(self, d: int) -> list[Sharer]:
        """The jobs on card ``d`` (empty for a card that is not shared)."""
        return list(self.cards.get(d, ()))

    def placement_note(self, req: JobRequest, d: int) -> str:
        """How share ``req`` is about to be placed on card ``d`` (call before :meth:`take`), for the
        job's ``share-placed`` history line and ``labgang explain``: whether it joins a card already
        shared (best fit) or takes a whole free card, and why."""
        devices = self.devices
        assert devices is not None
        self._flush()
        kind, units = share_kind(req), self.units(req)
        card = f"card {devices.uuid[d]} of {devices.node_names[devices.node_of[d]]}"
        sharers = self.cards.get(d)
        if sharers:
            return (
                f"joined {card}, already shared by {len(sharers)} job(s): a share goes best fit to the shared "
                "card with the least room left that holds it and whose sharers its queue may share with "
                "(share_gpus, share_with), so whole cards stay free for gangs"
            )
        shared = self.count[kind]
        roomy = sum(n for room, n in self._rooms[kind].items() if room >= units)
        held = f"{roomy} with room held by sharers its queue may not share with or reserved"
        if kind == "mps" and roomy:
            held = f"{self._mps_servers_note(units, roomy)}, or reserved"
        return (
            f"took whole {card}: no shared card it may join had room ({shared} {kind} card(s) shared, "
            f"{shared - roomy} without room, {held}); a share takes a whole free card only then, from the "
            f"fullest node allowing {kind}"
        )

    def reason(self, req: JobRequest, queue: str, user: str) -> PendingReason:
        """Why share ``req`` of ``queue`` by ``user`` has no card now, with numbers."""
        devices = self.devices
        assert devices is not None
        self._flush()
        kind, units = share_kind(req), self.units(req)
        shared = self.count[kind]
        roomy = sum(n for room, n in self._rooms[kind].items() if room >= units)
        model = req.gpu_model.lower() if req.gpu_model else None
        whole = self._free_whole(kind, model)
        what = describe_share(req, self.sharing.shards_per_gpu)
        # placement found no card: every shared card with room holds sharers it may not join (or is held back)
        held = f"{roomy} held by sharers its queue may not share with (share_gpus/share_with)"
        if kind == "mps":
            held = self._mps_servers_note(units, roomy)
        return PendingReason(
            ReasonCode.NO_CAPACITY,
            f"job needs {what}: {shared} {kind} card(s) shared, {shared - roomy} without room, {held}; "
            f"{whole} whole gpu free on nodes allowing {kind}",
        )

    count_servers = True
    """:meth:`_mps_servers_note` reads the open MPS cards counted per first sharer's user and room
    (kept beside the open-card index) instead of walking the index's cards of every queue and user;
    off only to check that it changes no reason."""

    def _mps_servers_note(self, units: int, roomy: int) -> str:
        """For an MPS share's reason: whose MPS servers hold the cards with room for ``units`` (one user
        per MPS server: such a card takes MPS shares of its server's user only, of queues that may share
        with its sharers). The same words for every user and queue: a cycle answers one user's share with
        another's verdict where its search read no user's own cards (``readers``)."""
        if not roomy:
            return "0 with room"
        servers: dict[str, int] = {}
        if self.count_servers:  # the index's counts per user: a few rooms for each of the users
            for owner, served in self._servers.items():
                n = sum(k for room, k in served.items() if room >= units)
                if n:
                    servers[owner] = n
        else:
            for by_user in self._open["mps"].values():
                for owner, rooms in by_user.items():
                    n = sum(len(cards) for room, cards in rooms.items() if room >= units)
                    if n:
                        servers[owner] = servers.get(owner, 0) + n
        users = sorted(servers, key=lambda u: (-servers[u], u))
        rule = "one user per MPS server: a card takes MPS shares of its server's user only, of queues that may "
        rule += "share with its sharers (share_gpus/share_with)"
        if roomy == 1 and len(users) == 1:
            return f"1 with room, whose MPS server serves user {users[0]} ({rule})"
        named = ", ".join(f"{u} ({servers[u]})" for u in users[:3]) + (", ..." if len(users) > 3 else "")
        return f"{roomy} with room, whose MPS servers serve users {named} ({rule})"

    def _free_whole(self, kind: str, model: str | None) -> int:
        """Free whole cards on nodes that allow ``kind`` (kept while the device book does not change)."""
        assert self.devices is not None
        key = (kind, model)
        got = self._whole.get(key)
        if got is not None and got[0] == self.devices.changes:
            return got[1]
        ix = self.devices.index(GPU, model)
        if self._every_node_allows(kind):
            return ix.total
        count = sum(ix.count(n) for c in ix.buckets for n in ix.buckets[c] if self.allows(n, kind))
        self._whole[key] = (self.devices.changes, count)
        return count


class QuietLeaves:
    """Shares a whole-device victim search takes off on paper only, while taking them off would not
    free their card (the device book) nor change a charge (the card stays held alone by their queue):
    the search puts what each would take off its queue's charge in the quota book itself (0), and
    takes them off for real (in the order held) before one that would free its card or sits on a
    card mixed with other queues', and before its fill-back.

    Args:
        book: the cycle's share book (read, never changed here).
    """

    def __init__(self, book: ShareBook) -> None:
        self.book = book
        self.held: list[tuple[RunningJob, int]] = []  # in order: the share, whole GPUs it took off
        self._on_card: dict[int, int] = {}  # per card: the sharers held

    def hold(self, job: RunningJob) -> int | None:
        """Hold running share ``job`` when taking it off after the ones held would leave a sharer on
        its card, and that card is held alone by its queue (module doc): its queue's charge stays
        the same (0, as :meth:`ShareBook.leave` would say). None, nothing held, when it is its card's
        last sharer, or its card is mixed with other queues' or not in the device book (taking it
        off may change a charge: it is taken off for real)."""
        book = self.book
        d = book.card_of.get(job.id)
        if d is None:
            return None
        on_card = self._on_card.get(d, 0) + 1
        if len(book.cards[d]) <= on_card:
            return None  # its card's last sharer: taking it off frees the card
        if book.card_alone(d) is None:
            return None  # a card mixed with other queues': their charges may change
        self._on_card[d] = on_card
        self.held.append((job, 0))
        return 0

    def drain(self) -> list[tuple[RunningJob, int]]:
        """The shares held and what each took off (see :meth:`hold`), in the order held, forgotten here."""
        held, self.held = self.held, []
        self._on_card.clear()
        return held


def quota_usage(sharing: GpuSharing, running: Iterable[RunningJob]) -> dict[tuple[str, str], int]:
    """``{(queue, resource): devices}`` held by ``running`` as the scheduler counts them: whole devices,
    plus each queue's share charge in whole GPUs (:meth:`ShareBook.charged`: cards held alone, and
    units on mixed cards rounded up), for the coordinator's queue views."""
    usage: dict[tuple[str, str], int] = {}
    shared: list[RunningJob] = []
    for job in running:
        if job.request.shared:
            shared.append(job)
        else:
            key = (job.queue, job.request.resource)
            usage[key] = usage.get(key, 0) + job.request.total
    if shared:
        for q, n in ShareBook(sharing, (), shared).initial_usage().items():
            usage[(q, GPU)] = usage.get((q, GPU), 0) + n
    return usage


def share_refusal(
    sharing: GpuSharing, spec: QueueSpec, shards: int, mps: int, nodes: Iterable[NodeGpuSharing] | None = None
) -> str | None:
    """The one-line refusal of a share request (``shards`` or ``mps`` percent) in queue ``spec``, or None.

    Args:
        sharing: the ``[sharing]`` table.
        spec: the job's queue.
        shards, mps: the request (0 = not asked).
        nodes: the nodes' sharing (None: what the configuration names: the cluster-wide values and
            every per-node override), so a submission is judged before any node reports.
    """
    if not (shards or mps):
        return None
    if spec.share_gpus == "none":
        return f"queue {spec.name} has share_gpus = 'none' (whole GPUs or MIG only); job asks for a share of a gpu"
    if nodes is None:
        nodes = [NodeGpuSharing(sharing.shards_per_gpu, sharing.mps), *sharing.nodes.values()]
    known = list(nodes)
    if mps and not any(n.mps for n in known):
        return "no node allows MPS ([sharing] mps = true); job asks for --mps"
    if shards:
        most = max((n.shards_per_gpu for n in known), default=0)
        if most == 0:
            return "no node allows shards ([sharing] shards_per_gpu > 0); job asks for --shards"
        if shards > most:
            return f"job asks for {shards} shards of a gpu; cards have {most} ([sharing] shards_per_gpu)"
    return None
