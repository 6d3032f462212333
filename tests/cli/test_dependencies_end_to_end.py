"""Job dependencies end to end: `labgang up --simulate` with real ranks, `submit -d`, `queue`,
`show`, and a coordinator restart in between (the dependency lives in the job spec; the jobs it
names that already finished are read back from SQLite)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from up_harness import Up, running_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgd")


def test_a_pipeline_runs_in_order_and_afternotok_is_cancelled_when_the_first_step_succeeds(up, tmp_path):
    gate = tmp_path / "gate"
    first = up.submit("--name", "prep", "--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    up.wait_state(first, {"running"})
    second = up.submit("-d", f"afterok:{first}", "--name", "train", "--", "true")
    cleanup = up.submit("--dependency", f"afternotok:{first}", "--", "true")

    held = up.job(second)
    assert held["state"] == "pending" and held["dependency"] == f"afterok:{first}"
    assert held["reason"] == {"code": "dependency", "message": f"waits for afterok:{first} (running)"}
    table = up.cli("queue").stdout
    assert f"(waits for afterok:{first} (running))" in next(line for line in table.splitlines() if "train" in line)
    shown = up.cli("show", second).stdout
    assert ["Dependency:", f"afterok:{first}"] in [line.split() for line in shown.splitlines()]
    assert f"dependency: waits for afterok:{first} (running)" in shown

    gate.touch()
    done = up.wait_state(second, {"succeeded", "failed", "cancelled"})
    assert done["state"] == "succeeded"
    prep = up.job(first)
    assert prep["state"] == "succeeded" and done["start_time"] >= prep["end_time"]
    assert any(h["event"] == "dependency-met" for h in done["history"])

    cancelled = up.wait_state(cleanup, {"cancelled"})
    assert cancelled["reason"] == {
        "code": "dependency_never",
        "message": f"afternotok:{first} can never be satisfied (succeeded)",
    }
    assert cancelled["start_time"] is None


def test_singleton_runs_one_job_per_name_at_a_time(up, tmp_path):
    gate = tmp_path / "gate"
    wait = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    one = up.submit("--name", "etl", "-d", "singleton", "--", "sh", "-c", wait)
    two = up.submit("--name", "etl", "-d", "singleton", "--", "true")
    up.wait_state(one, {"running"})
    held = up.job(two)
    assert held["state"] == "pending"
    assert held["reason"]["message"] == f"waits for singleton (job {one} of the same name is running)"
    gate.touch()
    done = up.wait_state(two, {"succeeded"})
    assert done["start_time"] >= up.job(one)["end_time"]


def test_a_dependency_on_no_job_or_with_a_bad_part_is_refused_in_one_line(up):
    before = up.cli("queue", "--all", "--json").stdout
    out = up.cli("submit", "-d", "afterok:99999", "--", "true")
    assert out.returncode == 1  # refused by the coordinator, as `cancel 99999` is
    assert up.cli("cancel", "99999").returncode == 1
    assert out.stderr == "labgang submit: -d/--dependency: no job 99999 (in afterok:99999)\n"
    out = up.cli("submit", "-d", "afterok:1,afterbogus:2", "--", "true")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "'afterbogus:2': 'afterbogus' is not a dependency type; allowed: after, afterany" in out.stderr
    assert up.cli("queue", "--all", "--json").stdout == before  # nothing was submitted


def test_a_held_job_waiting_for_its_dependency_shows_the_hold_first_and_the_dependency_too(up, tmp_path):
    gate = tmp_path / "gate"
    first = up.submit("--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    up.wait_state(first, {"running"})
    held = up.submit("-H", "-d", f"afterok:{first}", "--name", "heldeval", "--", "true")
    job = up.job(held)
    user, waits = job["user"], f"waits for afterok:{first} (running)"
    assert job["reason"] == {
        "code": "held",
        "message": f"held by {user}; `labgang release {held}` lets it be scheduled; also {waits}",
        "dependency": {"code": "dependency", "message": waits},
    }
    row = next(line for line in up.cli("queue").stdout.splitlines() if "heldeval" in line)
    assert row.endswith(f"(held by {user}; {waits})")
    said = up.cli("explain", held).stdout.splitlines()
    assert f"It waits: held by {user}; `labgang release {held}` lets it be scheduled (held)." in said
    assert f"It also {waits} (dependency): released, it still starts only once that holds." in said

    assert up.cli("release", held).returncode == 0
    assert up.job(held)["reason"] == {"code": "dependency", "message": waits}
    gate.touch()
    assert up.wait_state(held, {"succeeded", "failed", "cancelled"})["state"] == "succeeded"


def test_a_delay_of_a_million_minutes_is_stored_and_a_longer_one_refused_in_one_line(up):
    first = up.submit("--", "true")
    held = up.submit("-H", "-d", f"after:{first}+1000000", "--", "true")
    assert up.job(held)["dependency"] == f"after:{first}+1000000"  # was 1e+06: an internal error
    out = up.cli("update", held, f"Dependency=after:{first}+1000000000")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "1000000000 minutes is out of range; allowed: after:ID+MINUTES with 0 to 5,256,000 minutes" in out.stderr
    assert up.cli("cancel", held).returncode == 0


def test_dependencies_survive_a_restart_and_finished_jobs_are_read_from_the_store():
    with tempfile.TemporaryDirectory(prefix="lgr", dir="/tmp") as d:
        state, gate = Path(d), Path(d) / "gate"
        first = Up(state)
        try:
            done = first.submit("--", "true")
            first.wait_state(done, {"succeeded"})
            slow = first.submit("--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
            first.wait_state(slow, {"running"})
            after_both = first.submit("-d", f"afterok:{done},afterok:{slow}", "--", "true")
            assert first.job(after_both)["reason"]["message"] == f"waits for afterok:{slow} (running)"
        finally:
            assert first.stop() == 0, first.output()

        second = Up(state)  # `done` finished before: the new coordinator has it only in SQLite
        try:
            held = second.job(after_both)
            assert held["state"] == "pending" and held["dependency"] == f"afterok:{done}:{slow}"  # canonical
            assert held["reason"]["code"] == "dependency"
            second.wait_state(slow, {"running"})  # requeued by the shutdown, running again
            late = second.submit("-d", f"afterok:{done}", "--", "true")  # `done` is read from the store
            assert second.wait_state(late, {"succeeded", "cancelled"})["state"] == "succeeded"
            assert second.job(after_both)["state"] == "pending"
            gate.touch()
            assert second.wait_state(after_both, {"succeeded", "cancelled"})["state"] == "succeeded"
        finally:
            assert second.stop() == 0, second.output()


def test_any_of_over_one_type_waits_for_the_other_and_starts_on_the_first_success(up, tmp_path):
    gate = tmp_path / "gate"
    failed = up.submit("--", "false")
    ok = up.submit("--", "true")
    up.wait_state(failed, {"failed"})
    up.wait_state(ok, {"succeeded"})
    slow = up.submit("--", "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    up.wait_state(slow, {"running"})
    waits = up.submit("-d", f"afterok:{failed}?afterok:{slow}", "--", "true")
    starts = up.submit("-d", f"afterok:{ok}?afterok:{slow}", "--", "true")
    held = up.job(waits)
    assert held["state"] == "pending" and held["dependency"] == f"afterok:{failed}?afterok:{slow}"
    assert held["reason"] == {"code": "dependency", "message": f"waits for afterok:{slow} (running)"}
    shown = up.cli("show", waits).stdout
    assert ["Dependency:", f"afterok:{failed}?afterok:{slow}"] in [line.split() for line in shown.splitlines()]
    explained = up.cli("explain", waits).stdout
    assert f"It waits for afterok:{slow} (running) (dependency)." in explained and "waits: waits" not in explained
    assert up.wait_state(starts, {"succeeded", "cancelled"})["state"] == "succeeded"
    gate.touch()
    assert up.wait_state(waits, {"succeeded", "cancelled"})["state"] == "succeeded"


def test_job_ids_with_leading_zeros_and_unsupported_slurm_types(up):
    done = up.submit("--", "true")
    up.wait_state(done, {"succeeded"})
    after = up.submit("-d", f"afterok:{int(done):04d}", "--", "true")
    assert up.job(after)["dependency"] == f"afterok:{done}"
    for text, kind in (("expand:1", "expand"),):
        out = up.cli("submit", "-d", text, "--", "true")
        assert out.returncode == 2 and out.stderr.count("\n") == 1
        assert f"'{kind}' is a Slurm dependency type labgang does not support; allowed: after," in out.stderr
    out = up.cli("submit", "-d", "afterok:1+5", "--", "true")  # a delay is after's only (Slurm's after:ID+MINUTES)
    assert out.returncode == 2 and "a delay after a job ('1+5') is only for after, as in Slurm" in out.stderr
