"""Which coordinator and agent versions can work together (the link's version handshake).

Both sides send their labgang version when the agent dials in; the coordinator
calls :func:`check` and refuses the link with the message it returns.

The rule (versions are PEP 440 strings; only the release's major and minor count):

- identical version strings always work (one checkout, a development build);
- the major versions must match;
- in the 0.x series every minor release may change the wire format, so the minors
  must match too;
- from 1.0 on, the coordinator may be newer than the agent within the same major
  (upgrade the coordinator first, then the agents, one node at a time); an agent
  newer than its coordinator is refused, since it may send what the coordinator
  cannot read.

Patch releases (and pre-release, post-release or local tags) never break the link.
"""

from __future__ import annotations

import re

_RELEASE = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?")


def major_minor(version: str) -> tuple[int, int]:
    """The (major, minor) of a PEP 440 version string (``"0.3.1rc2"`` → ``(0, 3)``; ``"2"`` → ``(2, 0)``).

    Raises:
        ValueError: the string does not start with a release number.
    """
    match = _RELEASE.match(version)
    if match is None:
        raise ValueError(f"version {version!r} is not a PEP 440 version (expected e.g. '0.1.0')")
    return int(match.group(1)), int(match.group(2) or 0)


def check(coordinator_version: str, agent_version: str) -> str | None:
    """Decide whether an agent of ``agent_version`` may join a coordinator of ``coordinator_version``.

    Args:
        coordinator_version: the coordinator's labgang version (``"0.1.0"``).
        agent_version: the version the agent announced.

    Returns:
        None when they can work together; otherwise one sentence for both logs
        and the refused agent, naming both versions and which side to upgrade.
    """
    if coordinator_version == agent_version:
        return None
    try:
        coord = major_minor(coordinator_version)
        agent = major_minor(agent_version)
    except ValueError as exc:
        return f"version handshake refused: {exc}; coordinator {coordinator_version}, agent {agent_version}"
    both = f"agent {agent_version}, coordinator {coordinator_version}"
    if coord[0] != agent[0]:
        side = "agent" if agent < coord else "coordinator"
        return f"incompatible versions ({both}): major versions differ; upgrade the {side} to {max(coord, agent)[0]}.x"
    if coord[0] == 0 and coord[1] != agent[1]:
        side = "agent" if agent < coord else "coordinator"
        target = coordinator_version if side == "agent" else agent_version
        return f"incompatible versions ({both}): 0.x minor releases change the link; upgrade the {side} to {target}"
    if agent[1] > coord[1]:
        return (
            f"incompatible versions ({both}): the agent is newer than its coordinator; "
            f"upgrade the coordinator first (to {agent_version} or later)"
        )
    return None
