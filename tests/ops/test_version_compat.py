"""The version handshake rule, table-driven."""

from __future__ import annotations

import pytest
from labgang.launcher.coordinator.version_compat import check, major_minor


@pytest.mark.parametrize(
    "coordinator, agent",
    [
        pytest.param("0.1.0", "0.1.0", id="same"),
        pytest.param("0+unknown", "0+unknown", id="same-source-tree"),
        pytest.param("0.1.3", "0.1.0", id="0.x-patch-older-agent"),
        pytest.param("0.1.0", "0.1.7.dev2+g1a2b", id="0.x-patch-newer-agent"),
        pytest.param("1.4.0", "1.2.9", id="1.x-agent-lags-minors"),
        pytest.param("1.4.0", "1.4.2", id="1.x-newer-patch-agent"),
        pytest.param("2.0.0rc1", "2.0.0", id="prerelease"),
    ],
)
def test_compatible(coordinator, agent):
    assert check(coordinator, agent) is None


@pytest.mark.parametrize(
    "coordinator, agent, words",
    [
        pytest.param(
            "0.2.0", "0.1.5", ["agent 0.1.5", "coordinator 0.2.0", "upgrade the agent to 0.2.0"], id="0.x-old-agent"
        ),
        pytest.param("0.1.0", "0.2.0", ["upgrade the coordinator to 0.2.0"], id="0.x-new-agent"),
        pytest.param(
            "1.0.0", "2.1.0", ["major versions differ", "upgrade the coordinator to 2.x"], id="major-new-agent"
        ),
        pytest.param("2.0.0", "1.9.0", ["major versions differ", "upgrade the agent to 2.x"], id="major-old-agent"),
        pytest.param("1.2.0", "1.3.0", ["agent is newer", "upgrade the coordinator first"], id="1.x-agent-ahead"),
        pytest.param("0.1.0", "banana", ["not a PEP 440 version", "banana"], id="garbage"),
    ],
)
def test_refused_with_a_clear_message(coordinator, agent, words):
    message = check(coordinator, agent)
    assert message is not None
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    "text, expected", [("0.3.1rc2", (0, 3)), ("2", (2, 0)), ("v1.10.0", (1, 10)), ("0+unknown", (0, 0))]
)
def test_major_minor(text, expected):
    assert major_minor(text) == expected


def test_major_minor_rejects_non_versions():
    with pytest.raises(ValueError, match="PEP 440"):
        major_minor("latest")
