"""The pitfall detectors on a real H200's samples (tests/fixtures/device-h200; README.md there).

Each run file holds 8 cluster views (``labgang nodes --json``: the coordinator's ``GET /v1/nodes``
body, the agent reading real NVML), taken every 2-4 s while one job ran under ``labgang run``:
``big`` (bf16 matrix products; the first view is before its kernels started) and ``tiny``
(one-element kernels launched from a Python loop). They are read into :class:`ClusterSnapshot`
as ``labgang top`` reads the same body.

What the real GPU said, and so what these tests hold: under ``big`` the SMs are busy (GPM SM
activity about 96 %) and the driver reports ``sw_power_cap`` all along, at about 509 W of 700 W;
under ``tiny`` the SMs idle (0.03-0.05 %) while ``utilization.gpu`` reads 33-39 %: the launch loop
cannot keep this GPU's queue full. That reading is why the default ``busy_util_pct`` is 30: at the
80 it was before, *kernel busy, SMs idle* never named the run.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fixture_files import FIXTURES
from labgang.launcher import pitfalls as P
from labgang.launcher.pitfalls import ClusterSnapshot, PitfallKind, PitfallThresholds, Severity

DEVICE = FIXTURES / "device-h200"
DEFAULTS = PitfallThresholds()
# The default before this capture: kernel-busy only from 80 %.
BUSY_FROM_80 = PitfallThresholds(busy_util_pct=80.0)
UUID = "GPU-ffc3ec4c-2e93-bee0-7253-0d4b218beca6"


def views(name: str) -> list[dict[str, Any]]:
    """The concatenated ``labgang nodes --json`` documents of one run file, in order."""
    text, decoder, at, out = (DEVICE / name).read_text(), json.JSONDecoder(), 0, []
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        doc, at = decoder.raw_decode(text, at)
        out.append(doc)
    return out


def snapshots(name: str) -> list[ClusterSnapshot]:
    """One snapshot per view, taken at its inventory's time."""
    return [ClusterSnapshot.from_api(v["nodes"][0]["inventory"]["timestamp"], v) for v in views(name)]


BIG, TINY = snapshots("run-big.json"), snapshots("run-tiny.json")


def reading(snap: ClusterSnapshot, field: str) -> float:
    (node,) = snap.nodes
    (gpu,) = node.inventory.gpus
    return getattr(gpu, field)


def test_each_run_holds_eight_views_of_the_one_gpu_held_by_its_job():
    assert len(BIG) == len(TINY) == 8
    for run, job in ((BIG, "1"), (TINY, "2")):
        for snap in run:
            (dev,) = snap.nodes[0].devices
            assert (dev.uuid, dev.state, dev.job) == (UUID, "allocated", job)
    assert reading(BIG[0], "utilization_gpu_pct") == 0.0  # before the kernels started


# --------------------------------------------------------------------------- kernel busy, SMs idle


def test_big_run_is_kernel_busy_with_busy_sms_and_never_flagged():
    """From the third view on ``utilization.gpu`` is over the threshold, so only SM activity keeps
    the detector silent: the test fails if the detector stops looking at it."""
    for snap in BIG[2:]:
        assert reading(snap, "utilization_gpu_pct") >= DEFAULTS.busy_util_pct
        assert reading(snap, "sm_active_pct") >= DEFAULTS.sm_idle_pct
    for snap in BIG:
        assert P.detect_kernel_busy_sm_idle(snap, DEFAULTS) == []
        assert P.detect_kernel_busy_sm_idle(snap, BUSY_FROM_80) == []


def test_tiny_run_is_flagged_kernel_busy_sm_idle_with_its_numbers():
    for snap in TINY:
        util, sm = reading(snap, "utilization_gpu_pct"), reading(snap, "sm_active_pct")
        assert 33.0 <= util <= 39.0 and sm < 0.1
        [finding] = P.detect_kernel_busy_sm_idle(snap, DEFAULTS)
        assert (finding.kind, finding.severity, finding.subject) == (
            PitfallKind.KERNEL_BUSY_SM_IDLE,
            Severity.WARNING,
            "vm GPU 0",
        )
        assert finding.numbers == {"utilization_gpu_pct": util, "sm_active_pct": sm}
        assert (finding.node, finding.uuid, finding.job) == ("vm", UUID, "2")
        assert finding.summary == f"utilization.gpu {util:.0f}% but SM activity 0%"


def test_tiny_run_was_missed_at_the_old_default_of_80():
    """Why the default is 30: at 80 the launch-bound run, its SMs idle, was never named."""
    assert DEFAULTS.busy_util_pct == 30.0
    for snap in TINY:
        assert DEFAULTS.busy_util_pct <= reading(snap, "utilization_gpu_pct") < BUSY_FROM_80.busy_util_pct
        assert P.detect_kernel_busy_sm_idle(snap, BUSY_FROM_80) == []


# --------------------------------------------------------------------------- throttling


def test_big_run_power_cap_is_info_not_a_warning():
    """The real H200 reports ``sw_power_cap`` alone in every view while it runs, at ~73 % of its
    power limit: an INFO finding that says so, never a WARNING."""
    for snap in BIG[1:]:
        assert reading(snap, "clock_event_reasons") == ("sw_power_cap",)
        [finding] = P.detect_throttling(snap, DEFAULTS)
        assert (finding.kind, finding.severity, finding.uuid) == (PitfallKind.THROTTLING, Severity.INFO, UUID)
        assert finding.summary.startswith("clocks held at the power cap (sw_power_cap), ")
        assert "normal for a GPU running flat out" in finding.advice
        assert "one GPU of a gang is held while the others are not" in finding.advice
        assert finding.numbers["power_limit_w"] == 700.0
        assert finding.numbers["power_w"] == reading(snap, "power_w")
    assert [round(reading(s, "power_w")) for s in BIG[2:]] == [509, 509, 509, 509, 510, 511]
    assert all(f.severity is not Severity.WARNING for s in BIG for f in P.detect_all(s))


@pytest.mark.parametrize("run", ["run-big.json", "run-tiny.json"])
def test_idle_or_unthrottled_views_have_no_throttling(run):
    quiet = [s for s in snapshots(run) if not {"sw_power_cap"} & set(reading(s, "clock_event_reasons"))]
    assert quiet, run  # big: the view before its kernels (gpu_idle); tiny: every view (no reason)
    for snap in quiet:
        assert P.detect_throttling(snap, DEFAULTS) == []


def test_top_flags_the_power_cap_as_such_and_warns_of_nothing_under_the_big_run():
    """``labgang top``'s FLAGS cell for the real busy H200 says ``power-cap``, not a throttle, and
    the GPU's own warnings (``nodes --local``'s WARNINGS) are empty."""
    from labgang.tui.rows import device_rows
    from labgang.tui.state import StateBuilder

    for snap in BIG[1:]:
        [row] = device_rows(StateBuilder(mode="coordinator", source="device-h200", user="root").build(snap))
        assert row.cells[8] == "power-cap"
        (gpu,) = snap.nodes[0].inventory.gpus
        assert gpu.warnings() == ()
