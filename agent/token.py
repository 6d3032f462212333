"""The cluster token file: the one reader, for the coordinator and the agent alike.

The coordinator creates the file when it is missing (mode 0600, random); both sides refuse a
file that group or others may read, or an empty one.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from labgang.agent.config import AgentConfigError


class TokenError(AgentConfigError):
    """The cluster token file is missing, empty, or readable by group or others (the message
    starts with ``token_file:`` and names the file)."""


def read_token(path: str | Path, *, create: bool = False) -> str:
    """Read the cluster token; with ``create``, first write a fresh random one (mode 0600) when
    the file is missing.

    Raises:
        TokenError: missing (without ``create``), empty, or readable by group or others.
        OSError: it cannot be read or created.
    """
    p = Path(path)
    if create and not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise TokenError(f"token_file: {p} does not exist") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"token_file: {p} must be readable only by its owner (chmod 600 {p})")
    token = p.read_text().strip()
    if not token:
        raise TokenError(f"token_file: {p} is empty")
    return token
