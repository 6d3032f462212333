"""Ranks run as the submitting user, with that user's groups; the uid policy refuses what it must.

These tests create throwaway unprivileged users and a group (``useradd``/``groupadd``) and
delete them afterwards, so they need root, as in CI.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import uuid

import pytest
from labgang.agent.supervisor import LaunchRefused, RankState, Supervisor

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None, reason="creating throwaway users needs root and useradd"
)


@pytest.fixture(scope="module")
def accounts():
    """Two throwaway users; the first is also in an extra group. Removed after the module."""
    suffix = uuid.uuid4().hex[:8]
    group, user_a, user_b = f"lgtg{suffix}", f"lgta{suffix}", f"lgtb{suffix}"
    subprocess.run(["groupadd", group], check=True)
    try:
        subprocess.run(["useradd", "-M", "-s", "/bin/sh", "-G", group, user_a], check=True)
        subprocess.run(["useradd", "-M", "-s", "/bin/sh", user_b], check=True)
        yield pwd.getpwnam(user_a), pwd.getpwnam(user_b), grp.getgrnam(group)
    finally:
        for user in (user_a, user_b):
            subprocess.run(["userdel", user], check=False, capture_output=True)
        subprocess.run(["groupdel", group], check=False, capture_output=True)


@needs_root
def test_rank_runs_with_the_users_uid_and_groups_and_cannot_read_another_users_log(
    state_dir, make_spec, cleanup, h, accounts
):
    user_a, user_b, extra = accounts
    sup = Supervisor(state_dir)  # root agent; root jobs off (the default)
    cleanup.append(sup)
    b_log = sup.log_path("jobb", 0)
    a_log = sup.log_path("joba", 0)
    sup.launch(make_spec(["sh", "-c", "echo secret-of-b; exec sleep 60"], job_id="jobb", uid=user_b.pw_uid))
    h.run_until(sup, lambda: b_log.exists() and "secret-of-b" in b_log.read_text())
    script = (
        f"id -u; id -g; id -G; echo home=$HOME user=$USER; "
        f"if cat {b_log}; then echo READ-OK; else echo READ-DENIED; fi; "
        f"if test -r {a_log}; then echo OWN-OK; fi"
    )
    sup.launch(make_spec(["sh", "-c", script], job_id="joba", uid=user_a.pw_uid))
    h.run_until(sup, lambda: sup.status("joba", 0).state is RankState.GONE)
    lines = a_log.read_text().splitlines()
    assert lines[0] == str(user_a.pw_uid)
    assert lines[1] == str(user_a.pw_gid)
    assert set(lines[2].split()) == {str(user_a.pw_gid), str(extra.gr_gid)}
    assert lines[3] == f"home={user_a.pw_dir} user={user_a.pw_name}"
    assert "Permission denied" in "\n".join(lines) and "READ-DENIED" in lines and "READ-OK" not in lines
    assert "OWN-OK" in lines
    assert "secret-of-b" not in a_log.read_text()
    for log, owner in ((a_log, user_a), (b_log, user_b)):
        st = log.stat()
        assert st.st_uid == owner.pw_uid and stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(a_log.parent.stat().st_mode) == 0o711  # others may not list a job's logs
    sup.stop_job("jobb")


@needs_root
def test_root_agent_refuses_root_jobs_unless_allowed_and_uids_outside_the_list(state_dir, make_spec, cleanup, accounts):
    user_a, user_b, _ = accounts
    sup = Supervisor(state_dir, allowed_uids=[user_a.pw_uid])
    cleanup.append(sup)
    with pytest.raises(LaunchRefused, match="root jobs are off"):
        sup.launch(make_spec(["true"], uid=0))
    with pytest.raises(LaunchRefused, match=f"uid {user_b.pw_uid} .* does not allow"):
        sup.launch(make_spec(["true"], uid=user_b.pw_uid))
    with pytest.raises(LaunchRefused, match="no passwd entry"):
        sup.launch(make_spec(["true"], uid=4_000_000))
    with pytest.raises(LaunchRefused, match="may not enter /root"):
        sup.launch(make_spec(["true"], uid=user_a.pw_uid, cwd="/root"))
    with pytest.raises(LaunchRefused, match="gid 0"):
        sup.launch(make_spec(["true"], uid=user_a.pw_uid, gid=0))
    assert sup.ranks() == []


@needs_root
def test_agent_running_as_a_normal_user_refuses_another_uid(token, accounts):
    user_a, user_b, _ = accounts
    own_dir = tempfile.mkdtemp(prefix=f"lgsup-{token[:8]}-user-", dir="/tmp")
    os.chown(own_dir, user_a.pw_uid, user_a.pw_gid)
    # The interpreter lives under /root here, which the user cannot read: import everything as root,
    # then drop to the user before the supervisor exists (it reads its identity from geteuid()).
    script = textwrap.dedent(f"""
        import json, os, sys
        from labgang.agent.supervisor import LaunchRefused, LaunchSpec, Supervisor
        os.setgroups([]); os.setgid({user_a.pw_gid}); os.setuid({user_a.pw_uid})
        sup = Supervisor({own_dir!r})
        spec = LaunchSpec(job_id="j", rank=0, local_rank=0, world_size=1, local_world_size=1, node_rank=0,
                          master_addr="127.0.0.1", master_port=29500, devices=(), argv=("true",), env={{}},
                          cwd="/tmp", uid={user_b.pw_uid})
        answers = []
        for asked in (dict(uid={user_b.pw_uid}), dict(uid={user_a.pw_uid}, gid=0)):
            try:
                sup.launch(LaunchSpec(**{{**spec.to_dict(), **asked}}))
                answers.append(None)
            except LaunchRefused as exc:
                answers.append(str(exc))
        print(json.dumps({{"refused": answers, "euid": os.geteuid(), "ranks": len(sup.ranks())}}))
    """)
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=30)
    finally:
        shutil.rmtree(own_dir, ignore_errors=True)
    result = json.loads(out.stdout)
    assert result["euid"] == user_a.pw_uid and result["ranks"] == 0
    other_uid, other_gid = result["refused"]
    assert other_uid.startswith(f"uid: this agent runs as uid {user_a.pw_uid} ({user_a.pw_name})")
    assert f"asks for uid {user_b.pw_uid}" in other_uid
    assert other_gid.startswith(f"gid: this agent runs with gid {user_a.pw_gid} and cannot switch groups")
