"""How a bad configuration is worded: :class:`ConfigError` and pydantic's errors in labgang's words.

Every problem is one line that starts with its key path (``queues[1].within_queue``) and says what
is allowed; lists of allowed values read ``a, b`` (never a Python list). A problem is said once, in
the order found. A missing file reads the same for every command that takes one
(:func:`missing_file_problem`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from labgang.launcher.model import BorrowPolicy, FairPreemption, Queueing, ReclaimWithinCohort, WithinQueue
from pydantic import BaseModel, ValidationError

QUANTITY_MAX = 1_000_000
"""The largest device count a quota may name (a sanity bound far above any lab's devices)."""

CLUSTER_EXAMPLE = "config/cluster.toml"
"""The example cluster config a refusal points to."""

AGENT_EXAMPLE = "config/agent.toml"
"""The example agent config a refusal points to."""

NO_SUCH_FILE = "no such file"
"""The reason :func:`labgang.agent.tomlfile.read_toml` gives for a file that is not there."""


class ConfigError(ValueError):
    """A configuration file is missing, not TOML, or breaks a rule.

    Attributes:
        source: the file name (or ``<config>``).
        problems: one line per problem, each starting with the key path; each problem once,
            in the order given.
        unreadable: True when the file itself could not be read as TOML (missing, not
            UTF-8, not TOML): ``problems`` then holds that one reason, not key problems.
        missing: True when the file does not exist (``unreadable`` too).
    """

    def __init__(self, source: str, problems: list[str], *, unreadable: bool = False, missing: bool = False):
        self.source = source
        # one line each, whatever a key holds: a newline or control character is escaped
        lines = [
            p if p.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in p) for p in problems
        ]
        self.problems = list(dict.fromkeys(lines))
        self.unreadable = unreadable or missing
        self.missing = missing
        super().__init__(f"{source}: " + "; ".join(self.problems))


def missing_file_problem(option: str, example: str = CLUSTER_EXAMPLE) -> str:
    """What follows ``OPTION: PATH: `` when the file is not there, the same for every command.

    Args:
        option: how the command takes the file: ``--config`` or an argument's metavar (``FILE``).
        example: a file of that kind in the repository.

    Returns:
        ``"no such file; pass --config FILE (e.g. config/cluster.toml)"`` (for an argument:
        ``"no such file; pass FILE (e.g. …)"``).
    """
    usage = f"{option} FILE" if option.startswith("-") else option
    return f"{NO_SUCH_FILE}; pass {usage} (e.g. {example})"


def listed(values: Iterable[Any], empty: str = "none") -> str:
    """Allowed values as a person reads them: ``"a, b"``; ``empty`` when there are none."""
    return ", ".join(str(v) for v in values) or empty


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            if not text.isprintable() or not text:  # a key with a newline must not break the one line
                text = repr(text)
            out += ("." if out else "") + text
    return out or "(top level)"


def _allowed_for(loc: tuple[Any, ...]) -> str:
    field = next((p for p in reversed(loc) if isinstance(p, str) and p not in ("policy",)), None)
    enums: dict[str, type[enum.Enum]] = {
        "fair_preemption": FairPreemption,
        "within_queue": WithinQueue,
        "reclaim_within_cohort": ReclaimWithinCohort,
        "queueing": Queueing,
    }
    if loc and loc[-1] == "policy":
        return listed(m.value for m in BorrowPolicy)
    if field in enums:
        return listed(m.value for m in enums[field])
    return ""


def _known_keys(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    model = root
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part)
        if info is None:
            return []
        annotation = info.annotation
        inner = getattr(annotation, "__args__", (annotation,))
        nxt = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if nxt is None:
            return []
        model = nxt
    return sorted(model.model_fields)


# pydantic error types → what the key allows, in labgang's words (not pydantic's).
_WORDING: dict[str, str] = {
    "int_parsing": "an integer",
    "int_type": "an integer",
    "int_from_float": "a whole number",
    "int_parsing_size": "an integer",
    "float_parsing": "a number",
    "float_type": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
    "model_attributes_type": "a table",
}
_BOUNDS = {
    "greater_than": "> {gt}",
    "greater_than_equal": ">= {ge}",
    "less_than": "< {lt}",
    "less_than_equal": "<= {le}",
}


_QUOTA_KEYS = frozenset({"nominal", "borrowing_limit", "lending_limit"})


def _own_wording(err: Any) -> str | None:
    """``<input> is not allowed; allowed: <what>`` for the pydantic errors labgang words itself, else None."""
    kind, ctx, given = err["type"], err.get("ctx") or {}, err.get("input")
    shown = str(given).lower() if isinstance(given, bool) else repr(given)  # 2.0 reads 2.0, not 2
    if kind in _WORDING:
        what = _WORDING[kind]
        if _QUOTA_KEYS & {p for p in err["loc"] if isinstance(p, str)}:
            what = f"a device count from 0 to {QUANTITY_MAX}"
        elif kind == "int_parsing_size" or (kind in ("int_from_float", "int_parsing") and isinstance(given, float)):
            what = "a whole number"
        return f"{shown} is not allowed; allowed: {what}"
    if kind in _BOUNDS:
        return f"{shown} is out of range; allowed: a value {_BOUNDS[kind].format(**ctx)}"
    if kind == "missing":
        return "is required"
    if kind == "too_short":
        n = ctx.get("min_length")
        return f"is empty; allowed: at least {n} {'entry' if n == 1 else 'entries'}"
    if kind == "string_pattern_mismatch":
        return f"{shown} is not allowed; allowed: letters, digits, '_', '.' and '-', starting with a letter or digit"
    return None


def describe_errors(exc: ValidationError, root: type[BaseModel], *, top_level: bool = True) -> list[str]:
    """One line per pydantic error: ``<key path>: <message>[; allowed: ...]``, in labgang's wording.

    Args:
        exc: what ``root.model_validate`` raised.
        root: the model validated (its fields name the allowed keys of an unknown key's table).
        top_level: False to leave out the errors of ``root``'s own model validator (the cross-field
            rules, which the caller checks on the raw document instead, so each is said once).
    """
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        if not loc and not top_level and err["type"] == "value_error":
            continue
        if err["type"] == "extra_forbidden":
            lines.append(f"{_loc(loc)}: unknown key; allowed keys: {listed(_known_keys(root, loc))}")
            continue
        msg = err["msg"].removeprefix("Value error, ")
        own = _own_wording(err)
        if err["type"] == "enum":
            lines.append(f"{_loc(loc)}: {err['input']!r} is not allowed; allowed: {_allowed_for(loc)}")
        elif not loc or msg.startswith(f"{_loc(loc)}."):
            lines.extend(msg.splitlines())  # cross-field checks and [pitfalls] already start with their key path
        elif own is not None:
            lines.append(f"{_loc(loc)}: {own}")
        elif msg.startswith("."):
            lines.extend(f"{_loc(loc)}{line}" for line in msg.splitlines())  # per-entry checks (quota tables)
        else:
            lines.append(f"{_loc(loc)}: {msg}")
    return list(dict.fromkeys(lines))
