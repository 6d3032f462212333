"""Suggestions for a mistyped command or option, never a misleading one (docs/slurm.md).

A name is suggested only when it is close by edit distance (Damerau-Levenshtein: a swapped pair
of letters counts once, so ``sbumit`` is one step from ``submit``) and the distance is small for
its length: one edit for a name of up to six letters, two up to twelve, three beyond. An option
Slurm has and labgang reads differently or not at all (``--cpus-per-task``, ``--mem``, ``--gres``)
is answered from :data:`SLURM_OPTIONS` first: what labgang uses instead, or that it has no such
resource, rather than the nearest spelling (``--gpus-per-task`` is one letter from
``--cpus-per-task`` and means something else).

Stdlib only and pure.
"""

from __future__ import annotations

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

SLURM_OPTIONS: dict[str, str] = {
    "--mem-per-cpu": "Slurm's host memory per CPU; labgang counts host memory per node (--mem SIZE) "
    "or per GPU (--mem-per-gpu SIZE)",
    "--gres": "Slurm's generic resources; for --gres=gpu:N use -g N (full GPUs per rank) or --mig PROFILE",
    "--gpus": "Slurm's GPUs per job; labgang asks per rank: -n RANKS -g GPUS_PER_RANK",
    "-G": "Slurm's GPUs per job; labgang asks per rank: -n RANKS -g GPUS_PER_RANK",
    "--gpus-per-node": "Slurm's GPUs per node; labgang asks per rank: -n RANKS -g GPUS_PER_RANK, with --nodes",
    "--ntasks-per-node": "Slurm's tasks per node; labgang takes the total: -n RANKS with --nodes NODES",
    "--constraint": "Slurm's node features; for a GPU model use --gpu-model MODEL",
    "-C": "Slurm's node features; for a GPU model use --gpu-model MODEL",
    "--nodelist": "Slurm's node list; labgang places gangs itself (--nodes N asks for a count)",
    "-w": "Slurm's node list; labgang places gangs itself (--nodes N asks for a count)",
    "--wrap": "sbatch's --wrap is labgang submit's; here give the command after --: labgang run -- sh -c 'CMD'",
}
"""Slurm options labgang's submit and run do not take under that name: what to use instead (or
that there is nothing), said instead of an edit-distance guess. An entry whose option a command
does take is never consulted for that command."""


SLURM_COMMANDS: dict[str, str] = {
    "sbatch": "submit",
    "srun": "run",
    "salloc": "run --pty",
    "squeue": "queue",
    "scancel": "cancel",
    "sinfo": "nodes",
    "sacct": "history",
    "sreport": "report",
    "sprio": "queue -l (PRIO) or explain JOB",
    "sshare": "queues (fair share) or explain QUEUE",
    "sstat": "top",
    "scontrol": "show, hold, release, requeue, update, drain or resume",
}
"""Slurm's commands typed as labgang's: the labgang command each one is (docs/slurm-views.md)."""


def command_hint(name: str, commands: Iterable[str]) -> str | None:
    """For an unknown command ``name``: Slurm's name answered with labgang's
    (``"Slurm's sinfo is labgang nodes"``), else ``"did you mean queue?"`` for a near spelling among
    ``commands``, else None."""
    if name in SLURM_COMMANDS:
        return f"Slurm's {name} is labgang {SLURM_COMMANDS[name]}"
    near = closest(name, commands)
    return f"did you mean {', '.join(near)}?" if near else None


def distance(a: str, b: str) -> int:
    """Damerau-Levenshtein (optimal string alignment) distance: insertions, deletions,
    substitutions and swaps of two neighbouring characters each cost one."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def allowed_distance(name: str) -> int:
    """The most edits a suggestion may be from ``name`` (its dashes not counted): 1 up to six
    letters, 2 up to twelve, 3 beyond (``bogus`` is two from ``logs``: no suggestion)."""
    letters = len(name.lstrip("-"))
    return 1 if letters <= 6 else 2 if letters <= 12 else 3


def closest(name: str, candidates: Iterable[str]) -> list[str]:
    """The candidates nearest to ``name`` within :func:`allowed_distance`, best first (ties in
    the order given); empty when none is close enough. A long option is compared only with long
    options; a one-letter name (``-c``) gets no guess: every other letter is one edit away."""
    if len(name.lstrip("-")) <= 1:
        return []
    short = not name.startswith("--") and name.startswith("-")
    pool = [c for c in dict.fromkeys(candidates) if (not c.startswith("--") and c.startswith("-")) == short]
    limit = allowed_distance(name)
    scored = [(d, i, c) for i, c in enumerate(pool) if (d := distance(name.lower(), c.lower())) <= limit]
    if not scored:
        return []
    best = min(d for d, _, _ in scored)
    return [c for d, _, c in sorted(scored) if d == best]


def option_hint(name: str, options: Iterable[str], *, slurm: bool = False) -> str | None:
    """What to say about an unknown option ``name`` of a command taking ``options``: with
    ``slurm`` (``submit`` and ``run``, sbatch's and srun's counterparts) the Slurm note
    (:data:`SLURM_OPTIONS`), else ``"did you mean --name?"``, or None."""
    bare = name.partition("=")[0]
    if slurm and bare in SLURM_OPTIONS:
        return SLURM_OPTIONS[bare]
    near = closest(bare, options)
    return f"did you mean {', '.join(near)}?" if near else None
