"""The values of ``queue``'s and ``history``'s filters as users type them, squeue- and sacct-style:
comma-separated lists (``-u alice,bob``, ``-t PD,R``), job states by name or by Slurm's state
code, any case, and user ids for user names.

Pure and stdlib-only (no ``typing`` at run time): the fast CLI path (docs/cli-startup.md), the
click commands and the coordinator's ``GET /v1/jobs`` / ``GET /v1/history`` share it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

STATE_NAMES = (
    "pending",
    "admitted",
    "running",
    "terminating",
    "succeeded",
    "failed",
    "cancelled",
    "timeout",
    "node_fail",
)
"""Every job state, as the API names them (``JobState`` values, in lifecycle order)."""

STATE_CODES = {"PD": "pending", "CF": "admitted", "R": "running", "CG": "terminating"}
STATE_CODES.update({"CD": "succeeded", "F": "failed", "CA": "cancelled", "TO": "timeout", "NF": "node_fail"})
"""Slurm's squeue/sacct state codes for labgang's states. ``admitted`` (devices chosen, ranks being
started) has no Slurm state of its own; it is ``CF``, Slurm's CONFIGURING (nodes allocated, the
job not yet running), the nearest."""

ALLOWED_STATES = [f"{name} ({code})" for code, name in STATE_CODES.items()]
"""The allowed states in words, each with its code: ``pending (PD)``..."""


def items(text: str) -> tuple[str, ...]:
    """The items of one comma-separated filter value: ``"a, b,,c"`` -> ``("a", "b", "c")``.

    Raises:
        ValueError: ``text`` holds no item at all (``""``, ``",,"``): "must not be empty".
    """
    found = tuple(part.strip() for part in text.split(",") if part.strip())
    if not found:
        raise ValueError("must not be empty")
    return found


def flatten(values: Iterable[Iterable[str]]) -> tuple[str, ...]:
    """The items of a flag given several times, each value already split (:func:`items`), in
    order, each once: ``[("a", "b"), ("b",)]`` -> ``("a", "b")``."""
    return tuple(dict.fromkeys(item for value in values for item in value))


def job_state(text: str) -> str:
    """The state a filter item names: a state name or a Slurm code (:data:`STATE_CODES`), any case.

    Raises:
        ValueError: neither; the message quotes ``text`` as given and lists the allowed states.
    """
    name = text.strip().lower()
    if name in STATE_NAMES:
        return name
    code = STATE_CODES.get(text.strip().upper())
    if code is None:
        raise ValueError(f"state {text!r} is not a job state; allowed: {', '.join(ALLOWED_STATES)}")
    return code


def state_items(text: str) -> tuple[str, ...]:
    """The states one ``-t``/``-s`` value names (``"PD,running"`` -> ``("pending", "running")``).

    Raises:
        ValueError: an empty value, or an item that is not a state (see :func:`job_state`).
    """
    return tuple(dict.fromkeys(job_state(item) for item in items(text)))


def user_name(text: str) -> str:
    """The user ``text`` names: a user of this machine whose uid it is (``0`` -> ``root``, as squeue
    takes uids), else ``text`` itself."""
    if not (text.isascii() and text.isdigit()):
        return text
    import pwd  # built into the interpreter: no file to read

    try:
        return pwd.getpwuid(int(text)).pw_name
    except (KeyError, OverflowError):
        return text


def whose_jobs(all_users: bool, users: tuple[str, ...]) -> tuple[bool, tuple[str, ...]]:
    """``(all_users, users)`` with ``-u all`` read as every user's jobs, one rule for ``queue`` and
    ``cancel`` (``history`` and ``report`` read it so too): ``(True, ())`` when ``users`` holds
    ``"all"``, else as given."""
    if "all" in users:
        return True, ()
    return all_users, users
