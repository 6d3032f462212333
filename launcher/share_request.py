"""The checks of one share request (``--shards N``, ``--mps PCT``, ``--gpu-mem SIZE``) that need no
cluster: the CLI, the API and scenario files word them alike (docs/sharing.md).

Import-light (the CLI's fast path uses it): no pydantic, no scheduler.
"""

from __future__ import annotations

MAX_SHARDS = 64
"""Most shards a card may be split into (``[sharing] shards_per_gpu``)."""

_CLI = {
    "shards": "--shards",
    "mps": "--mps",
    "mig": "--mig",
    "workers": "-n/--workers",
    "gpus": "-g/--gpus-per-worker",
    "exclusive": "--exclusive",
}
_FILE = {
    "shards": "shards",
    "mps": "mps",
    "mig": "mig",
    "workers": "workers",
    "gpus": "gpus_per_worker",
    "exclusive": "exclusive",
}


def share_problem(
    shards: int,
    mps: int,
    workers: int,
    per_worker: int,
    mig: str | None,
    *,
    cli: bool = False,
    exclusive: bool = False,
) -> str | None:
    """Why this share request is malformed, in one line naming the options, or None.

    Args:
        shards: shards of one card (0 = none).
        mps: percent of one card's SMs through MPS (0 = none).
        workers: ranks in the gang.
        per_worker: devices per rank.
        mig: the MIG profile asked for, or None.
        cli: word the options as the CLI's flags (else as scenario keys).
        exclusive: the job asks for whole nodes (``--exclusive``).
    """
    k = _CLI if cli else _FILE
    if not (shards or mps):
        return None
    if shards < 0 or shards > MAX_SHARDS:
        return f"{k['shards']} {shards} is out of range; allowed: 1..{MAX_SHARDS}"
    if mps < 0 or mps > 100:
        return f"{k['mps']} {mps} is out of range; allowed: 1..100 (percent of one GPU's SMs)"
    if shards and mps:
        return f"{k['shards']} and {k['mps']} exclude each other: a card is shared one way at a time"
    what = k["shards"] if shards else k["mps"]
    if mig is not None:
        return f"{what} and {k['mig']} exclude each other: a share is of a whole GPU, a MIG device is not shared"
    if exclusive:
        excl = k["exclusive"]
        return f"{what} and {excl} exclude each other: a share is part of one GPU, {excl} takes whole nodes"
    if workers > 1 or per_worker > 1:
        return f"{what} is a share of one GPU for one rank; allowed: {k['workers']} 1 and {k['gpus']} 1"
    return None
