"""``-o/--output`` and ``-e/--error`` file name patterns, as Slurm's ``sbatch`` writes them
(docs/slurm.md): ``%j`` the job's number, ``%A`` the array's id, ``%a`` the task's index, ``%x`` the
job name, ``%u`` the user, ``%N`` the node, ``%t`` the rank, ``%%`` a ``%``.

A pattern without ``%t`` names one file, written by rank 0; with ``%t`` every rank writes its own.
A relative name is relative to the submit directory. Pure and stdlib only.
"""

from __future__ import annotations

ESCAPES = ("%j", "%A", "%a", "%x", "%u", "%N", "%t", "%%")
"""The escapes a pattern may hold."""

NO_ARRAY_INDEX = "4294967294"
"""What ``%a`` becomes for a job that is not in an array: Slurm's value (``NO_VAL``), so a file name
a Slurm script expects is the same."""


def check_pattern(pattern: str) -> str | None:
    """What is wrong with ``pattern`` (``"%q is not an escape; allowed: %j, %A, ..."``), or None.
    Empty patterns and NUL bytes are refused; ``%`` must start one of :data:`ESCAPES`."""
    if not pattern.strip():
        return "must not be empty; allowed: a file name, with %j, %A, %a, %x, %u, %N, %t, %% for the job's facts"
    if "\0" in pattern:
        return "contains a NUL byte"
    i = 0
    while i < len(pattern):
        if pattern[i] == "%":
            pair = pattern[i : i + 2]
            if pair not in ESCAPES:
                return f"{pair!r} is not an escape; allowed: {', '.join(ESCAPES)}"
            i += 2
        else:
            i += 1
    return None


def per_rank(pattern: str) -> bool:
    """True when the pattern names one file per rank (it holds ``%t``)."""
    return "%t" in pattern.replace("%%", "")


def expand(
    pattern: str,
    *,
    cwd: str,
    number: int,
    array_id: str | None,
    index: int | None,
    name: str,
    user: str,
    node: str,
    rank: int,
) -> str:
    """The absolute file name of ``pattern`` for one rank.

    Args:
        pattern: a pattern :func:`check_pattern` accepts.
        cwd: the submit directory (absolute); a relative result is joined to it.
        number: the job's number (``%j``; an array task's own number).
        array_id, index: the array's id and the task's index (``%A``, ``%a``); None for a job of its
            own (``%A`` is then its number and ``%a`` Slurm's :data:`NO_ARRAY_INDEX`).
        name, user, node, rank: ``%x``, ``%u``, ``%N``, ``%t``.
    """
    import os.path

    values = {
        "j": str(number),
        "A": array_id if array_id is not None else str(number),
        "a": str(index) if index is not None else NO_ARRAY_INDEX,
        "x": name,
        "u": user,
        "N": node,
        "t": str(rank),
        "%": "%",
    }
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "%" and i + 1 < len(pattern) and pattern[i + 1] in values:
            out.append(values[pattern[i + 1]])
            i += 2
        else:
            out.append(pattern[i])
            i += 1
    return os.path.normpath(os.path.join(cwd, "".join(out)))
