"""``labgang run``'s follower when the coordinator goes away: an orderly stop (its socket file removed)
is said at once; one that leaves its socket file behind (``kill -9``) is waited for, and given up on
after ``RETURN_WAIT_S`` with a line that says only what is known. A scripted client stands in for a
coordinator that no longer answers; the end-to-end cases are in test_up_kill9_restart.py."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from labgang.launcher.api.client import CoordinatorUnavailable
from labgang.launcher.cli import follow
from labgang.launcher.cli.follow import FollowStopped, follow_to_the_end, labgang_stopped


class GoneClient:
    """A coordinator that stopped answering at ``socket_path``; ``on_call(n)`` runs before the n-th job()."""

    def __init__(self, socket_path: Path, on_call=None) -> None:
        self.socket_path = socket_path
        self.calls = 0
        self.on_call = on_call or (lambda n: None)

    def job(self, job_id: str) -> dict:
        self.calls += 1
        self.on_call(self.calls)
        raise CoordinatorUnavailable(self.socket_path)

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow, "POLL_S", 0.001)
    monkeypatch.setattr(follow, "RETURN_WAIT_S", 0.05)


def test_an_orderly_stop_is_said_at_once(tmp_path: Path) -> None:
    client = GoneClient(tmp_path / "labgang.sock")  # no socket file: removed by the orderly stop
    err = io.StringIO()
    with pytest.raises(FollowStopped) as stopped:
        follow_to_the_end(client, "4", (0,), io.BytesIO(), err)  # type: ignore[arg-type]
    assert (stopped.value.message, stopped.value.exit_code) == (labgang_stopped("4", False), 1)
    assert err.getvalue() == "" and client.calls == 1


def test_a_coordinator_that_left_its_socket_behind_is_waited_for_then_given_up_on(tmp_path: Path) -> None:
    (tmp_path / "labgang.sock").touch()  # what a kill -9 leaves: the file, nobody answering
    client = GoneClient(tmp_path / "labgang.sock")
    err = io.StringIO()
    with pytest.raises(FollowStopped) as stopped:
        follow_to_the_end(client, "4", (0,), io.BytesIO(), err)  # type: ignore[arg-type]
    assert client.calls >= 2  # asked again while it waited
    assert err.getvalue().splitlines() == [
        "labgang: labgang went away without stopping (killed?) while following job 4; "
        "waiting up to 0.05 s for it to come back"
    ]
    assert stopped.value.exit_code == 1
    assert stopped.value.message == (
        "labgang went away while following job 4 and is not back after 0.05 s; its ranks run on only until their "
        "node's lease stops them (`labgang show 4` once labgang is back)"
    )


def test_a_socket_removed_while_run_waits_is_an_orderly_stop_after_all(tmp_path: Path) -> None:
    sock = tmp_path / "labgang.sock"
    sock.touch()
    client = GoneClient(sock, on_call=lambda n: sock.unlink() if n == 3 else None)
    with pytest.raises(FollowStopped) as stopped:
        follow_to_the_end(client, "4", (0,), io.BytesIO(), io.StringIO(), requeued=True)  # type: ignore[arg-type]
    assert stopped.value.message == labgang_stopped("4", True)
    assert client.calls == 3
