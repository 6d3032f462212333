"""Kueue's quota arithmetic: private/shared parts, pool usage, available and potential."""

import pytest
from labgang.launcher.scheduler.quota import QuotaBook
from sched_builders import queue


def lenders() -> list:
    return [
        queue("lend1").cohort("lend").nominal(gpu=6).lending_limit(gpu=4).build(),
        queue("lend2").cohort("lend").nominal(gpu=6).lending_limit(gpu=2).build(),
    ]


def test_lending_limit_example_from_queue_semantics():
    # lend1 N=6 L=4, lend2 N=6 L=2: private 2 and 4, pool 6; lend1 uses 3, lend2 uses 7
    book = QuotaBook(lenders(), {("lend1", "gpu"): 3, ("lend2", "gpu"): 7})
    assert (book.private("lend1", "gpu"), book.private("lend2", "gpu")) == (2, 4)
    assert book.pool("lend", "gpu") == 6
    assert book.pool_usage("lend", "gpu") == 1 + 3
    assert book.available("lend1", "gpu") == 2
    assert book.potential("lend1", "gpu") == 8  # private 2 + pool 6


def test_private_part_is_never_lent():
    book = QuotaBook(lenders(), {("lend2", "gpu"): 0})
    # lend2 may take its own 6 plus what lend1 lends (4): 10; lend1's private 2 stays out of reach
    assert book.available("lend2", "gpu") == 10
    book.add("lend2", "gpu", 10)
    assert book.available("lend1", "gpu") == 2


@pytest.mark.parametrize(
    "usage_a,usage_b,limit,want_a",
    [
        pytest.param(0, 0, None, 8, id="unlimited-borrowing-takes-whole-cohort"),
        pytest.param(0, 0, 2, 5, id="borrowing-limit-caps-at-nominal-plus-limit"),
        pytest.param(5, 0, 2, 0, id="at-nominal-plus-limit-nothing-more"),
        pytest.param(0, 4, 2, 4, id="cohort-runs-out-before-limit"),
        pytest.param(3, 5, None, 0, id="cohort-full"),
    ],
)
def test_available_with_borrowing_limit(usage_a, usage_b, limit, want_a):
    a = queue("team-a").cohort("lab").nominal(gpu=3)
    if limit is not None:
        a = a.borrowing_limit(gpu=limit)
    b = queue("team-b").cohort("lab").nominal(gpu=5)
    book = QuotaBook([a.build(), b.build()], {("team-a", "gpu"): usage_a, ("team-b", "gpu"): usage_b})
    assert book.available("team-a", "gpu") == want_a


def test_queue_without_cohort_neither_lends_nor_borrows():
    book = QuotaBook(
        [queue("solo").nominal(gpu=4).build(), queue("x").cohort("lab").nominal(gpu=4).build()], {("solo", "gpu"): 1}
    )
    assert book.available("solo", "gpu") == 3
    assert book.potential("solo", "gpu") == 4
    assert book.available("x", "gpu") == 4  # solo's idle GPUs are not in lab's pool


def test_unlisted_resource_is_unusable_and_nominal_zero_may_borrow():
    book = QuotaBook(
        [
            queue("a").cohort("lab").nominal(gpu=0).build(),
            queue("b").cohort("lab").nominal(gpu=4, mig_1g_10gb=2).build(),
        ]
    )
    assert book.available("a", "gpu") == 4
    assert book.available("a", "mig-1g.10gb") == 0
    assert not book.lists("a", "mig-1g.10gb")


def test_add_and_release_are_symmetric():
    book = QuotaBook(lenders())
    book.add("lend1", "gpu", 5)
    book.add("lend1", "gpu", -5)
    assert book.pool_usage("lend", "gpu") == 0
    assert book.available("lend1", "gpu") == 8


def test_borrowed_and_unused_lendable_parts():
    # lend1 N=6 L=4 uses 1: 5 unused, of which it may lend 4; lend2 N=6 L=2 uses 9: borrows 3
    book = QuotaBook(lenders(), {("lend1", "gpu"): 1, ("lend2", "gpu"): 9})
    assert (book.borrowed("lend1", "gpu"), book.borrowed("lend2", "gpu")) == (0, 3)
    assert (book.unused_lendable("lend1", "gpu"), book.unused_lendable("lend2", "gpu")) == (4, 0)
    book.add("lend1", "gpu", 4)  # 5 used: 1 unused, all of it lendable
    assert book.unused_lendable("lend1", "gpu") == 1
