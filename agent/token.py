"""The cluster token file: what a token may look like, and the one reader of the file.

The coordinator makes tokens with :func:`secrets.token_urlsafe` (43 url-safe characters);
an admin may bring their own. Every reader (``labgang install --token-from``, the agent's
``token_file``, the coordinator's) checks the same rule with :func:`token_problem`, so a
wrong file is refused where it is read, naming the file, instead of failing later in an
HTTP header.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from labgang.agent.config import AgentConfigError

TOKEN_MIN_CHARS = 16
TOKEN_MAX_CHARS = 4096
TOKEN_RULE = f"{TOKEN_MIN_CHARS} to {TOKEN_MAX_CHARS} printable ASCII characters without spaces on one line"


def token_problem(data: bytes) -> str | None:
    """Why ``data`` (a token file's bytes) is not a usable cluster token, or None when it is.

    Leading and trailing whitespace (the final newline) is ignored.

    Returns:
        One phrase such as ``"has a byte that is not ASCII text at offset 3 (0x8f); allowed: ..."``, ending with what is
        allowed (:data:`TOKEN_RULE`); None for a good token.
    """
    text = data.strip()
    if not text:
        return f"is empty; allowed: {TOKEN_RULE}"
    for offset, byte in enumerate(text):
        if byte < 0x21 or byte > 0x7E:
            what = "a space or control character" if byte < 0x80 else "a byte that is not ASCII text"
            return f"has {what} at offset {offset} (0x{byte:02x}); allowed: {TOKEN_RULE}"
    if not TOKEN_MIN_CHARS <= len(text) <= TOKEN_MAX_CHARS:
        return f"has {len(text)} characters; allowed: {TOKEN_RULE}"
    return None


def parse_token(data: bytes) -> str:
    """The token in a token file's bytes.

    Raises:
        ValueError: :func:`token_problem` found one (the message is that phrase).
    """
    problem = token_problem(data)
    if problem is not None:
        raise ValueError(problem)
    return data.strip().decode("ascii")


class TokenError(AgentConfigError):
    """The cluster token file is missing, unreadable, readable by group or others, or not a token.

    Attributes:
        path: the file. problem: what is wrong, as a phrase (``"does not exist"``).
    """

    def __init__(self, path: Path, problem: str, *, by_coordinator: bool = False) -> None:
        message = f"{path}: the cluster token {problem}" if by_coordinator else f"token_file: {path} {problem}"
        super().__init__(message)
        self.path = path
        self.problem = problem


def read_token(path: str | Path, *, create: bool = False, by_coordinator: bool = False) -> str:
    """Read the cluster token (the coordinator, the agent and ``labgang install`` alike).

    Args:
        create: first write a fresh random token (mode 0600) when the file is missing.
        by_coordinator: word errors as the coordinator's (``"<file>: the cluster token ..."``)
            rather than as the agent's config key (``"token_file: <file> ..."``).

    Raises:
        TokenError: missing (without ``create``), unreadable, readable by group or others, or
            not a token (:func:`token_problem`).
        OSError: the file cannot be created.
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
        raise TokenError(p, "does not exist", by_coordinator=by_coordinator) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        why = f"must be readable only by its owner (chmod 600 {p})"
        raise TokenError(p, why, by_coordinator=by_coordinator)
    try:
        return parse_token(p.read_bytes())
    except ValueError as exc:
        raise TokenError(p, str(exc), by_coordinator=by_coordinator) from None
    except OSError as exc:
        raise TokenError(p, f"cannot be read: {exc.strerror}", by_coordinator=by_coordinator) from None
