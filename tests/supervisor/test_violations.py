"""Which rank processes on which devices are device violations (``agent/supervisor/violations.py``)."""

from __future__ import annotations

from labgang.agent.supervisor.violations import DeviceViolation, find_violations, own_devices

RANKS = {
    100: ("7.0", 0, ("GPU-a",)),
    101: ("7.0", 0, ("GPU-a",)),  # a data-loader child of rank 0
    200: ("8.0", 0, ("MIG-1",)),
}
PARENTS = {"MIG-1": "GPU-m", "MIG-2": "GPU-m"}


def test_own_devices_include_the_parent_of_a_mig_device_only() -> None:
    assert own_devices(("MIG-1",), PARENTS) == {"MIG-1", "GPU-m"}
    assert own_devices(("GPU-a",), PARENTS) == {"GPU-a"}


def test_a_rank_or_its_child_on_another_device_is_a_violation() -> None:
    seen = {"GPU-a": [100], "GPU-b": [101, 999], "MIG-1": [200], "MIG-2": [200], "GPU-m": [200]}
    assert find_violations(seen, RANKS, PARENTS) == [
        DeviceViolation("7.0", 0, "GPU-b", 101, ("GPU-a",)),  # the child, on a GPU not given
        DeviceViolation("8.0", 0, "MIG-2", 200, ("MIG-1",)),  # a sibling MIG device of its own
    ]  # 999 belongs to no rank: foreign, not a violation
    assert find_violations({"GPU-a": [100, 101], "MIG-1": [200]}, RANKS, PARENTS) == []
    assert DeviceViolation("7.0", 0, "GPU-b", 101, ("GPU-a",)).to_dict() == {
        "job_id": "7.0", "rank": 0, "device": "GPU-b", "pid": 101, "allowed": ["GPU-a"],
    }  # fmt: skip
