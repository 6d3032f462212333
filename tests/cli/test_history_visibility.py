"""One visibility rule (a decided policy change after a new user's finding): a user who may read
another user's jobs in ``queue``, ``show`` and ``report`` reads their history too (``history -u
NAME``, ``-u all``, as ``sacct`` without ``PrivateData``), through the fast path and the click
command; a job's logs stay its owner's and the admins'. Real ``labgang up``, a real second Unix user."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from up_harness import Up

pytestmark = pytest.mark.slow


def test_any_user_reads_every_users_history_but_not_their_logs(lab_users) -> None:
    (other, _) = lab_users
    with tempfile.TemporaryDirectory(prefix="lghv", dir="/tmp") as d:
        Path(d).chmod(0o755)
        instance = Up(Path(d))
        try:
            job = instance.submit("--", "true")
            instance.wait_state(job, {"succeeded"})
            env = {"LABGANG_STATE_DIR": d}
            for args in (["history", "-u", "root"], ["history", "-u", "all", "--attempts"]):
                out = other.run(args, env=env)
                assert out.returncode == 0, out.stderr
                assert [line.split()[0] for line in out.stdout.splitlines()[1:]] == [job], out.stdout
            out = other.run(["history", "--json", "-u", "root"], env=env)
            assert out.returncode == 0, out.stderr
            assert [(r["id"], r["user"]) for r in json.loads(out.stdout)["jobs"]] == [(job, "root")]
            logs = other.run(["logs", job], env=env)
            assert logs.returncode == 1 and "only its owner or an admin" in logs.stderr, logs.stderr
        finally:
            assert instance.stop() == 0, instance.output()
