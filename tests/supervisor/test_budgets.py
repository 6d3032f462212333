"""``find_over_budget``: a sharing rank's processes on its card summed against its ``--gpu-mem``."""

from __future__ import annotations

from labgang.agent.supervisor.budgets import MemoryOverBudget, find_over_budget

GIB = 1024**3
RANKS = {
    10: ("1.0", 0, ("GPU-a",)),
    11: ("1.0", 0, ("GPU-a",)),  # a child of rank 0 of job 1
    20: ("2.0", 0, ("GPU-a",)),
    30: ("3.0", 0, ("GPU-b",)),  # no budget
}
BUDGETS = {("1.0", 0): ("GPU-a", 4 * GIB), ("2.0", 0): ("GPU-a", 4 * GIB)}


def test_a_ranks_processes_are_summed_and_the_biggest_is_named():
    memory = {"GPU-a": [(10, 1 * GIB), (11, 3 * GIB + 1), (20, 4 * GIB), (99, 50 * GIB)], "GPU-b": [(30, 70 * GIB)]}
    assert find_over_budget(memory, RANKS, BUDGETS) == [MemoryOverBudget("1.0", 0, "GPU-a", 11, 4 * GIB + 1, 4 * GIB)]


def test_unknown_usage_counts_as_nothing_and_a_pid_listed_twice_once():
    memory = {"GPU-a": [(10, None), (20, 3 * GIB), (20, 3 * GIB)]}
    assert find_over_budget(memory, RANKS, BUDGETS) == []


def test_usage_on_another_card_is_not_the_budgets_business():
    memory = {"GPU-b": [(10, 9 * GIB)]}  # a device violation, found by violations.py
    assert find_over_budget(memory, RANKS, BUDGETS) == []
