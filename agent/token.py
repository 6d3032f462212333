"""What a cluster token may look like, checked wherever a token file is read.

The coordinator makes tokens with :func:`secrets.token_urlsafe` (43 url-safe characters);
an admin may bring their own. Every reader (``labgang install --token-from``, the agent's
``token_file``, the coordinator's) checks the same rule with :func:`token_problem`, so a
wrong file is refused where it is read, naming the file, instead of failing later in an
HTTP header.
"""

from __future__ import annotations

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
