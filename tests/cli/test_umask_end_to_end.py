"""The submitter's umask reaches the job: `labgang up --simulate` with real ranks, submitted from
shells with different umasks (Slurm passes SLURM_UMASK on; labgang sends the CLI's umask in the
submission and each rank's shim gives it to the rank before its exec). The shim keeps 0o077 for its
own files; the rank and its --output/--error files must not inherit that."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from up_harness import Up, running_up, shared_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgu")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("umask", "printed", "file_mode"),
    [(0o002, "0002", 0o664), (0o077, "0077", 0o600), (0o022, "0022", 0o644)],
    ids=["group-writable", "private", "usual"],
)
def test_a_job_runs_with_the_umask_of_the_shell_that_submitted_it(
    up: Up, tmp_path: Path, umask: int, printed: str, file_mode: int
) -> None:
    script = f"umask > {tmp_path}/mask; touch {tmp_path}/made; echo to-stderr >&2"
    job = up.submit(
        "-o", str(tmp_path / "out.txt"), "-e", str(tmp_path / "err.txt"), "--", "sh", "-c", script, umask=umask
    )
    done = up.wait_state(job, {"succeeded", "failed", "cancelled"})
    assert done["state"] == "succeeded", done
    assert done["umask"] == umask
    assert (tmp_path / "mask").read_text().strip() == printed
    assert _mode(tmp_path / "made") == file_mode
    assert _mode(tmp_path / "out.txt") == file_mode
    assert _mode(tmp_path / "err.txt") == file_mode
    assert (tmp_path / "err.txt").read_text() == "to-stderr\n"
    assert ["Umask:", printed] in [line.split() for line in up.cli("show", job).stdout.splitlines()]


def test_labgang_run_passes_the_umask_too(up: Up, tmp_path: Path) -> None:
    out = up.cli("run", "--", "sh", "-c", "umask", umask=0o002)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0002"


def test_another_users_job_runs_as_them_with_the_umask_of_their_shell(lab_users) -> None:
    """alice submits from ``umask 002``: the rank runs as alice (the shim drops to her uid) with that
    umask, and her -o file is created as her with it too (the shim's own umask is swapped for the open)."""
    alice = lab_users[0]
    home = alice.user.home
    with shared_up("lgumask-", '[[queues]]\nname = "default"\nnominal = { gpu = 8 }\n') as up:
        submit = (
            f"umask 002; {alice.python} -m labgang.launcher submit -o {home}/out.txt -- "
            f"sh -c 'umask > {home}/mask; touch {home}/made; id -u'"
        )
        out = alice.run_argv(["sh", "-c", submit], env={"LABGANG_STATE_DIR": str(up.state_dir)})
        assert out.returncode == 0, out.stderr
        job = out.stdout.strip()
        assert up.wait_state(job, {"succeeded", "failed", "cancelled"})["state"] == "succeeded"
    assert (home / "mask").read_text().strip() == "0002"
    for name in ("made", "out.txt"):
        assert (home / name).stat().st_uid == alice.user.uid
        assert _mode(home / name) == 0o664, name
    assert (home / "out.txt").read_text().strip() == str(alice.user.uid)
