"""Slurm's host lists (``gpu[01-04,07]``, ``rack[1-2]-n[1-3]``, ``n1,n3``): the form a Slurm admin types
for nodes, as ``scontrol update NodeName=gpu[01-04] State=DRAIN`` takes it. ``labgang drain`` and
``labgang resume`` accept it (launcher/cli/drain.py).

Rules, as Slurm's hostlist expression: commas outside brackets separate host names; a bracket holds
comma-separated numbers and ranges ``a-b`` (``a`` ≤ ``b``), each number padded with zeros to the
width of the lower bound as written (``[08-10]`` → ``08 09 10``, ``[8-10]`` → ``8 9 10``); several
brackets in one name give every combination, the leftmost varying slowest. A name without brackets is itself.
"""

from __future__ import annotations

import itertools
import re

MAX_HOSTS = 65536  # one list names at most this many hosts (more is a typo such as [1-1000000])

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


class HostlistError(ValueError):
    """A host list that cannot be read; the message names the list and what is allowed."""


def expand(text: str) -> list[str]:
    """The host names ``text`` names, in its order, each once (the first time it appears).

    ``expand("gpu[01-03,07],cpu1") == ["gpu01", "gpu02", "gpu03", "gpu07", "cpu1"]``.

    Raises:
        HostlistError: an unclosed or nested bracket, an empty name or bracket, a range whose end is
            below its start or that is not ``N`` or ``N-M``, or more than ``MAX_HOSTS`` names.
    """
    names: dict[str, None] = {}
    for part in _split_top_level(text):
        if not part:
            raise _error(text, "an empty host name (two commas, or one at an end)")
        for name in _expand_one(text, part):
            names[name] = None
            if len(names) > MAX_HOSTS:
                raise _error(text, f"more than {MAX_HOSTS} hosts")
    return list(names)


def _split_top_level(text: str) -> list[str]:
    """``text`` cut at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise _error(text, "a bracket inside a bracket")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise _error(text, "a ']' without its '['")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise _error(text, "a '[' without its ']'")
    parts.append(text[start:])
    return parts


def _expand_one(text: str, part: str) -> list[str]:
    """The names one comma-free part (``rack[1-2]-n[1-3]``) gives, leftmost bracket slowest."""
    pieces = re.split(r"\[([^\]]*)\]", part)  # literal, bracket, literal, bracket, ..., literal
    choices: list[list[str]] = []
    for i, piece in enumerate(pieces):
        choices.append(_numbers(text, piece) if i % 2 else [piece])
    combos = 1
    for options in choices:
        combos *= len(options)
        if combos > MAX_HOSTS:
            raise _error(text, f"more than {MAX_HOSTS} hosts")
    return ["".join(combo) for combo in itertools.product(*choices)]


def _numbers(text: str, bracket: str) -> list[str]:
    """The numbers one bracket's text (``01-03,07``) gives, as strings with their width."""
    numbers: list[str] = []
    for item in bracket.split(","):
        match = _RANGE.fullmatch(item)
        if match is None:
            raise _error(text, f"[{bracket}] holds {item!r}; allowed: numbers and ranges such as 1-4 or 01-08")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise _error(text, f"the range {item} ends below its start")
        if int(high) - int(low) >= MAX_HOSTS:
            raise _error(text, f"more than {MAX_HOSTS} hosts")
        numbers.extend(str(n).zfill(len(low)) for n in range(int(low), int(high) + 1))
    return numbers


def _error(text: str, problem: str) -> HostlistError:
    return HostlistError(f"host list {text!r}: {problem}")


__all__ = ["MAX_HOSTS", "HostlistError", "expand"]
