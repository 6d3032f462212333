"""LaunchSpec validation and round trips, RankStatus/RankEvent, the state table, SupervisorConfig."""

from __future__ import annotations

import signal

import pytest
from labgang.agent.supervisor import (
    InvalidSpec,
    LaunchSpec,
    RankEvent,
    RankState,
    RankStatus,
    SupervisorConfig,
    pick_free_port,
)
from labgang.agent.supervisor.states import TRANSITIONS, can_transition

BASE = dict(
    job_id="job-17",
    rank=1,
    local_rank=1,
    world_size=4,
    local_world_size=2,
    node_rank=0,
    master_addr="node-a",
    master_port=29400,
    devices=("GPU-1", "GPU-2"),
    argv=("python", "train.py"),
    env={"A": "1"},
    cwd="/home/alice",
    uid=1000,
)


def test_spec_round_trips_through_its_dict():
    spec = LaunchSpec(**BASE, gid=1000, restart_count=3, grace=5.5, warn_signal=int(signal.SIGUSR1), warn_before=60)
    assert LaunchSpec.from_dict(spec.to_dict()) == spec
    assert spec.to_dict()["devices"] == ["GPU-1", "GPU-2"]
    assert "warn_shell_only" not in spec.to_dict()  # written only when set, for agents before it
    shell_only = LaunchSpec(**BASE, warn_signal=int(signal.SIGUSR1), warn_before=60, warn_shell_only=True)
    assert LaunchSpec.from_dict(shell_only.to_dict()) == shell_only and shell_only.to_dict()["warn_shell_only"] is True


@pytest.mark.parametrize(
    "field, value, allowed",
    [
        ("job_id", "../etc", "1-128 characters"),
        ("job_id", "", "1-128 characters"),
        ("rank", 4, "0..3"),
        ("local_rank", -1, "0..1"),
        ("world_size", 0, "integer >= 1"),
        ("local_world_size", 5, "1..4"),
        ("master_port", 70000, "1..65535"),
        ("master_addr", "", "host name"),
        ("devices", ("GPU-1,GPU-2",), "UUID"),
        ("argv", (), "non-empty"),
        ("env", {"A=B": "1"}, "names without"),
        ("cwd", "relative/dir", "absolute path"),
        ("uid", -1, "integer >= 0"),
        ("gid", "wheel", "integer >= 0 or null"),
        ("restart_count", -1, "integer >= 0"),
        ("grace", float("nan"), "seconds >= 0"),
        ("warn_before", -1, "seconds >= 0"),
        ("warn_signal", 999, "signal number"),
    ],
)
def test_bad_spec_fields_are_named_with_allowed_values(field, value, allowed):
    with pytest.raises(InvalidSpec) as err:
        LaunchSpec(**{**BASE, field: value})
    assert err.value.field == field and str(err.value).startswith(f"{field}:") and allowed in str(err.value)


def test_from_dict_rejects_unknown_and_missing_fields():
    with pytest.raises(InvalidSpec, match=r"^colour: is not a LaunchSpec field"):
        LaunchSpec.from_dict({**LaunchSpec(**BASE).to_dict(), "colour": "red"})
    data = LaunchSpec(**BASE).to_dict()
    del data["uid"]
    with pytest.raises(InvalidSpec, match=r"^uid: is missing"):
        LaunchSpec.from_dict(data)


def test_a_port_not_chosen_yet_is_none_in_the_contract_and_0_on_the_wire():
    """The coordinator sends a run's first node no port; that agent picks one (with_master_port)."""
    spec = LaunchSpec(**{**BASE, "master_port": None})
    wire = spec.to_dict()
    assert wire["master_port"] == 0
    back = LaunchSpec.from_dict(wire)
    assert back == spec and back.master_port is None
    chosen = back.with_master_port(29500)
    assert chosen.master_port == 29500 and LaunchSpec.from_dict(chosen.to_dict()) == chosen
    with pytest.raises(InvalidSpec, match=r"^master_port: "):
        back.with_master_port(0)


@pytest.mark.parametrize("data", [["job_id", "rank"], "spec", None, 7])
def test_from_dict_of_something_that_is_not_an_object_names_the_spec(data):
    with pytest.raises(InvalidSpec, match=r"^spec: a \w+ is not a launch spec"):
        LaunchSpec.from_dict(data)


def test_status_and_event_round_trip():
    status = RankStatus("j", 2, RankState.RELEASING, 123, 123, 137, 1.5, 2.5)
    assert RankStatus.from_dict(status.to_dict()) == status and status.to_dict()["state"] == "releasing"
    event = RankEvent("j", 2, "exited", 137, 3.0)
    assert RankEvent.from_dict(event.to_dict()) == event
    with pytest.raises(ValueError, match="kind: 'died' is not an event kind"):
        RankEvent("j", 2, "died", None, 3.0)


def test_every_state_can_reach_gone_and_gone_is_terminal():
    for start in RankState:
        seen, frontier = {start}, [start]
        while frontier:
            for nxt in TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert RankState.GONE in seen
    assert TRANSITIONS[RankState.GONE] == frozenset() and RankState.GONE.is_terminal
    assert not can_transition(RankState.RELEASING, RankState.RUNNING)
    assert not can_transition(RankState.KILLING, RankState.STOPPING)


def test_supervisor_config_validates_and_applies_the_foreign_policy():
    assert SupervisorConfig().foreign == "block"
    with pytest.raises(ValueError, match=r"^foreign: 'ignore' is not a policy \(allowed: block, report\)"):
        SupervisorConfig.from_dict({"foreign": "ignore"})
    with pytest.raises(ValueError, match=r"^colour: not a supervisor setting"):
        SupervisorConfig.from_dict({"colour": 1})
    with pytest.raises(ValueError, match=r"^log_max_bytes"):
        SupervisorConfig.from_dict({"log_max_bytes": 10})
    cfg = SupervisorConfig.from_dict({"foreign": "report", "allowed_uids": [1000, 1001], "allow_root": True})
    assert cfg.allowed_uids == frozenset({1000, 1001}) and cfg.allow_root


def test_pick_free_port_returns_a_bindable_port():
    import socket

    port = pick_free_port()
    with socket.socket() as sock:
        sock.bind(("", port))
    assert 1024 <= port <= 65535
