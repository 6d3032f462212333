"""Shares of one GPU (--shards, --mps): best-fit packing, the trust rule, quota in GPU units, preemption."""

from __future__ import annotations

from labgang.launcher.model import GPU, GpuSharing, JobRequest, NodeGpuSharing, QueueSpec, WithinQueue
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.decisions import ReasonCode
from labgang.launcher.scheduler.snapshot import Device, Node, PendingJob, RankPlacement, RunningJob, Snapshot

FOUR = GpuSharing(shards_per_gpu=4, mps=True)


def node(name: str, gpus: int = 8) -> Node:
    return Node(name, tuple(Device(f"GPU-{name}-{i}", name, GPU) for i in range(gpus)))


def q(name: str, gpu: int = 8, share: str = "queue", **kw) -> QueueSpec:
    return QueueSpec(name=name, nominal={GPU: gpu}, share_gpus=share, **kw)


def shard(n: int = 1, **kw) -> JobRequest:
    return JobRequest(shards=n, **kw)


class Sim:
    """Runs cycles and keeps what they admit running, as the drivers do."""

    def __init__(self, nodes, queues, sharing: GpuSharing = FOUR) -> None:
        self.nodes = tuple(nodes)
        self.queues = tuple(queues)
        self.sharing = sharing
        self.running: list[RunningJob] = []
        self.seq = 0

    def submit(self, job_id: str, queue: str, req: JobRequest, user: str = "u", priority: int = 0):
        """One cycle with one new pending job; returns the decision: placement devices or a reason."""
        self.seq += 1
        pj = PendingJob(job_id, queue, req, priority, float(self.seq), self.seq, float(self.seq), user=user)
        snap = Snapshot(
            now=float(self.seq),
            nodes=self.nodes,
            queues=self.queues,
            running=tuple(self.running),
            pending=(pj,),
            gpu_sharing=self.sharing,
        )
        result = run_cycle(snap)
        self.last = result
        for a in result.admitted:
            self.running.append(
                RunningJob(a.job_id, queue, req, priority, pj.submit_time, pj.submit_time, a.placement, user=user)
            )
            return a.placement[0].devices
        return result.pending[0].reason

    def card(self, job_id: str) -> str:
        return next(j.placement[0].devices[0] for j in self.running if j.id == job_id)


def test_four_one_shard_jobs_share_one_card_and_a_fifth_takes_a_second():
    s = Sim([node("n1")], [q("team")])
    cards = [s.submit(f"j{i}", "team", shard())[0] for i in range(5)]
    assert cards[:4] == ["GPU-n1-0"] * 4
    assert cards[4] == "GPU-n1-1"


def test_a_queue_that_may_not_share_with_them_never_lands_on_their_cards():
    s = Sim([node("n1", 2)], [q("team"), q("other")])
    assert s.submit("a", "team", shard()) == ("GPU-n1-0",)
    # other has share_gpus = "queue" too, but the two queues do not name each other
    assert s.submit("b", "other", shard()) == ("GPU-n1-1",)
    assert s.submit("c", "team", shard()) == ("GPU-n1-0",)
    assert s.submit("d", "other", shard(2)) == ("GPU-n1-1",)  # other's card: 3 of 4 shards used
    assert s.submit("e", "team", shard(2)) == ("GPU-n1-0",)  # team's card: full (1 + 1 + 2)
    # the only room left is a shard on other's card: a team job waits rather than join it
    got = s.submit("f", "team", shard())
    assert got.code is ReasonCode.NO_CAPACITY
    assert "1 held by sharers its queue may not share with" in got.message
    assert "0 whole gpu free" in got.message


def test_queues_naming_each_other_share_a_card():
    s = Sim([node("n1", 2)], [q("a", share_with=("b",)), q("b", share_with=("a",))])
    assert s.submit("x", "a", shard()) == ("GPU-n1-0",)
    assert s.submit("y", "b", shard()) == ("GPU-n1-0",)


def test_one_sided_share_with_is_not_enough():
    s = Sim([node("n1", 2)], [q("a", share_with=("b",)), q("b")])
    s.submit("x", "a", shard())
    assert s.submit("y", "b", shard()) == ("GPU-n1-1",)


def test_share_gpus_user_keeps_other_users_off():
    s = Sim([node("n1", 2)], [q("a", share="user")])
    assert s.submit("x", "a", shard(), user="ann") == ("GPU-n1-0",)
    assert s.submit("y", "a", shard(), user="bob") == ("GPU-n1-1",)
    assert s.submit("z", "a", shard(), user="ann") == ("GPU-n1-0",)


def test_share_gpus_none_is_unschedulable_for_shares_and_whole_jobs_avoid_shared_cards():
    s = Sim([node("n1", 2)], [q("team"), q("strangers", share="none")])
    got = s.submit("x", "strangers", shard())
    assert got.code is ReasonCode.UNSCHEDULABLE and "share_gpus = 'none'" in got.message
    s.submit("a", "team", shard())
    assert s.submit("w", "strangers", JobRequest()) == ("GPU-n1-1",)
    got = s.submit("w2", "strangers", JobRequest())
    assert got.code is ReasonCode.NO_CAPACITY  # the shared card is never handed out whole


def test_thirty_two_one_shard_jobs_fill_an_eight_gpu_node():
    s = Sim([node("n1")], [q("team", gpu=16)])
    for i in range(32):
        assert isinstance(s.submit(f"j{i}", "team", shard()), tuple)
    per_card = {}
    for j in s.running:
        per_card[j.placement[0].devices[0]] = per_card.get(j.placement[0].devices[0], 0) + 1
    assert per_card == {f"GPU-n1-{i}": 4 for i in range(8)}
    assert s.submit("j32", "team", shard()).code is ReasonCode.NO_CAPACITY


def test_best_fit_prefers_the_fullest_shared_card_and_keeps_whole_nodes_free():
    s = Sim([node("n1", 2), node("n2", 2)], [q("team")])
    s.running.append(RunningJob("whole", "team", JobRequest(), 0, 0, 0, (RankPlacement(0, "n2", ("GPU-n2-0",)),)))
    # n2 is fuller (one gpu busy): the first share goes there, n1 stays whole
    assert s.submit("a", "team", shard(3)) == ("GPU-n2-1",)
    assert s.submit("b", "team", shard(2)) == ("GPU-n1-0",)  # 2 do not fit on n2-1 (1 left)
    assert s.submit("c", "team", shard(1)) == ("GPU-n2-1",)  # best fit: the card with 1 left, not 2


def test_shares_count_against_quota_in_gpu_units():
    s = Sim([node("n1")], [q("team", gpu=1)])
    for i in range(4):
        assert isinstance(s.submit(f"j{i}", "team", shard()), tuple)
    got = s.submit("j4", "team", shard())
    assert got.code is ReasonCode.OVER_QUOTA
    assert got.message == (
        "team uses 1 of 1 gpu; job needs 1; the job is 1 shard of a gpu (1/4 gpu); team's shares are "
        "charged 1 gpu: 1 card held alone by team's shares: 1 gpu (they use 1 gpu; a card a queue's shares "
        "hold alone counts whole: no other queue can use the rest of it)"
    )
    # mps 25 is a quarter gpu: with 2 of 4 quarters used by shards... a fresh queue shows it
    s2 = Sim([node("n1")], [q("m", gpu=1)])
    assert isinstance(s2.submit("a", "m", JobRequest(mps=50)), tuple)
    assert isinstance(s2.submit("b", "m", JobRequest(mps=50)), tuple)
    assert s2.submit("c", "m", JobRequest(mps=1)).code is ReasonCode.OVER_QUOTA


def test_mps_card_serves_one_user_at_a_time():
    s = Sim([node("n1", 2)], [q("team")])
    assert s.submit("a", "team", JobRequest(mps=25), user="ann") == ("GPU-n1-0",)
    assert s.submit("b", "team", JobRequest(mps=25), user="bob") == ("GPU-n1-1",)
    assert s.submit("c", "team", JobRequest(mps=50), user="ann") == ("GPU-n1-0",)
    # shards never join an MPS card
    assert s.submit("d", "team", shard(), user="ann").code is ReasonCode.NO_CAPACITY


def test_mode_must_be_allowed_on_some_node():
    s = Sim([node("n1", 2)], [q("team")], GpuSharing(shards_per_gpu=4))
    got = s.submit("a", "team", JobRequest(mps=50))
    assert got.code is ReasonCode.UNSCHEDULABLE and "MPS" in got.message
    got = s.submit("b", "team", shard(5))
    assert got.code is ReasonCode.UNSCHEDULABLE and "cards have 4" in got.message


def test_node_override_turns_shares_off_on_that_node():
    sharing = GpuSharing(shards_per_gpu=4, nodes={"n1": NodeGpuSharing(0, False)})
    s = Sim([node("n1", 1), node("n2", 4)], [q("team")], sharing)
    # n1 is the fullest node with a free gpu but takes no shares
    assert s.submit("a", "team", shard()) == ("GPU-n2-0",)


def test_preemption_takes_shared_jobs_as_victims_and_frees_the_card():
    s = Sim([node("n1", 1)], [q("team", gpu=1, within_queue=WithinQueue.LOWER_PRIORITY)])
    s.submit("a", "team", shard(2))
    s.submit("b", "team", shard(2))
    s.submit("big", "team", JobRequest(), priority=10)
    victims = {v for p in s.last.preempted for v in p.victims}
    assert victims == {"a", "b"}


def test_a_share_victim_makes_room_for_a_higher_priority_share():
    s = Sim([node("n1", 1)], [q("team", gpu=1, within_queue=WithinQueue.LOWER_PRIORITY)])
    s.submit("a", "team", shard(2))
    s.submit("b", "team", shard(2))
    s.submit("c", "team", shard(1), priority=5)
    victims = [v for p in s.last.preempted for v in p.victims]
    assert len(victims) == 1 and victims[0] in {"a", "b"}


def test_shares_under_fair_sharing_pack_and_count_the_same():
    from labgang.launcher.model import SharingPolicy

    queues = (
        QueueSpec(name="a", nominal={GPU: 1}, cohort="lab", share_gpus="queue"),
        QueueSpec(name="b", nominal={GPU: 1}, cohort="lab"),
    )
    pending = tuple(PendingJob(f"s{i}", "a", shard(), 0, float(i), i, float(i), user="u") for i in range(6))
    snap = Snapshot(
        now=10.0,
        nodes=(node("n1", 2),),
        queues=queues,
        running=(),
        pending=pending,
        sharing=SharingPolicy(fair_sharing=True),
        gpu_sharing=FOUR,
    )
    result = run_cycle(snap)
    cards = [a.placement[0].devices[0] for a in result.admitted]
    # a's nominal 1 plus b's idle 1 borrowed: 8 quarters fit, so all six run, four on one card
    assert len(cards) == 6 and cards.count("GPU-n1-0") == 4 and cards.count("GPU-n1-1") == 2


def test_a_starving_share_reserves_no_card():
    from labgang.launcher.scheduler.nominate import nominate
    from labgang.launcher.scheduler.starvation import reserve_for_starving
    from labgang.launcher.scheduler.state import CycleState

    spec = q("team", starvation_after=0.0)
    share = PendingJob("s", "team", shard(), 0, 0.0, 1, 0.0, user="u")
    gang = PendingJob("g", "team", JobRequest(per_worker=2), 0, 0.0, 2, 0.0, user="u")
    snap = Snapshot(
        now=5.0, nodes=(node("n1", 2),), queues=(spec,), running=(), pending=(share, gang), gpu_sharing=FOUR
    )
    state = CycleState(snap)
    by_queue, _ = nominate(snap, state)
    reserved = reserve_for_starving(state, [e for entries in by_queue.values() for e in entries])
    assert list(reserved) == ["g"]  # the starving gang reserves its two cards; the share none


def test_an_admitted_share_says_whether_it_joined_a_shared_card_or_took_a_whole_one_and_why():
    s = Sim([node("n1", 3)], [q("team"), q("other")])
    s.submit("a", "team", shard())
    (first,) = s.last.admitted
    assert first.note.startswith("took whole card GPU-n1-0 of n1: no shared card it may join had room (0 shard")
    s.submit("b", "team", shard())
    assert s.last.admitted[0].note.startswith("joined card GPU-n1-0 of n1, already shared by 1 job(s): a share goes")
    s.submit("c", "other", shard())  # team's card has room, but other may not share with team
    assert s.last.admitted[0].note.startswith(
        "took whole card GPU-n1-1 of n1: no shared card it may join had room (1 shard card(s) shared, "
        "0 without room, 1 with room held by sharers its queue may not share with or reserved)"
    )
    assert s.submit("w", "other", JobRequest()) == ("GPU-n1-2",)
    assert s.last.admitted[0].note == ""  # whole devices: no note


def test_max_gpus_per_user_counts_a_share_as_its_gpu_fraction():
    s = Sim([node("n1", 4)], [q("team", max_gpus_per_user=1)])
    for i in range(4):  # four quarter-GPU shards of one user fill a limit of 1 gpu
        assert s.submit(f"s{i}", "team", shard()) == ("GPU-n1-0",)
    got = s.submit("s4", "team", shard())
    assert got.code is ReasonCode.USER_LIMIT
    assert got.message == "user u runs 1 of 1 gpu allowed in queue team (max_gpus_per_user); job needs 0.25"
    assert s.submit("other-user", "team", shard(), user="v") == ("GPU-n1-1",)  # the limit is per user
    s = Sim([node("n1", 4)], [q("team", max_gpus_per_user=2)])
    assert s.submit("m", "team", JobRequest(mps=25)) == ("GPU-n1-0",)
    assert s.submit("w", "team", JobRequest()) == ("GPU-n1-1",)  # 1.25 of 2 used
    got = s.submit("w2", "team", JobRequest())
    assert got.code is ReasonCode.USER_LIMIT
    assert got.message == "user u runs 1.25 of 2 gpu allowed in queue team (max_gpus_per_user); job needs 1"
    assert s.submit("m2", "team", JobRequest(mps=75)) == ("GPU-n1-0",)  # 0.75 more still fits: 2 of 2
    elastic = JobRequest(workers=2, min_workers=1)  # an elastic gang starts no larger than the room left
    assert s.submit("e", "team", elastic).code is ReasonCode.USER_LIMIT
    s = Sim([node("n1", 4)], [q("team", max_gpus_per_user=2)])
    assert s.submit("m", "team", JobRequest(mps=25)) == ("GPU-n1-0",)
    s.submit("e", "team", elastic)
    (admitted,) = s.last.admitted
    assert len(admitted.placement) == 1  # 2 - 0.25 leaves room for one whole gpu, not two


def test_an_mps_share_refused_by_another_users_mps_server_names_that_user():
    """One MPS server per user: the reason says whose server holds the card with room."""
    s = Sim([node("n1", 1)], [q("team")])
    assert s.submit("a", "team", JobRequest(mps=25), user="ann") == ("GPU-n1-0",)
    got = s.submit("b", "team", JobRequest(mps=25), user="bob")
    assert got.code is ReasonCode.NO_CAPACITY
    two = Sim([node("n1", 2)], [q("team")])  # with a second card, bob takes it: the note says why
    assert two.submit("a", "team", JobRequest(mps=25), user="ann") == ("GPU-n1-0",)
    assert two.submit("b", "team", JobRequest(mps=25), user="bob") == ("GPU-n1-1",)
    assert "(1 mps card(s) shared, 0 without room, 1 with room, whose MPS server serves user ann (one user per " in (
        two.last.admitted[0].note
    )
    assert got.message == (
        "job needs mps 25% of a gpu (1/4 gpu): 1 mps card(s) shared, 0 without room, 1 with room, whose MPS "
        "server serves user ann (one user per MPS server: a card takes MPS shares of its server's user only, of "
        "queues that may share with its sharers (share_gpus/share_with)); 0 whole gpu free on nodes allowing mps"
    )


def test_mps_cards_with_room_name_their_servers_users_most_cards_first():
    s = Sim([node("n1", 4)], [q("team"), q("lab")])
    for job, queue, user in (("a", "team", "ann"), ("b", "team", "bob"), ("c", "team", "bob"), ("d", "lab", "cy")):
        assert isinstance(s.submit(job, queue, JobRequest(mps=60), user=user), tuple)
    got = s.submit("e", "lab", JobRequest(mps=30), user="ann")  # ann's own card is team's: lab may not share it
    assert got.code is ReasonCode.NO_CAPACITY
    assert "4 mps card(s) shared, 0 without room, 4 with room, whose MPS servers serve users bob (2), ann (1), " in (
        got.message
    )
    assert "cy (1) (one user per MPS server" in got.message
    full = s.submit("f", "lab", JobRequest(mps=50), user="dan")  # 40 % left on each: no card has room
    assert "4 mps card(s) shared, 4 without room, 0 with room; 0 whole gpu free" in full.message
