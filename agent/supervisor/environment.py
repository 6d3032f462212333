"""The environment a rank starts with: the submitted one, minus a few variables, plus the contract.

The contract, always set by the agent and overriding anything submitted:
``CUDA_VISIBLE_DEVICES`` (comma list of device UUIDs, MIG UUIDs for MIG devices),
``CUDA_DEVICE_ORDER=PCI_BUS_ID``, ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` and ``NODE_RANK`` (both the node's index
among the job's nodes, as torchrun sets them), ``LABGANG_JOB_ID``, ``LABGANG_RESTART_COUNT``, and
for a task of a job array the ``LABGANG_ARRAY_*`` / ``SLURM_ARRAY_*`` variables (``array_env``),
and the ``SLURM_*`` variables of a Slurm batch step that labgang can honour (``slurm_env``, computed
by the coordinator: ``SLURM_JOB_ID``, ``SLURM_PROCID``... docs/slurm.md).

A rank that shares its card (``spec.share``, :func:`share_variables`) has ``CUDA_VISIBLE_DEVICES``
= that one card, and under MPS also ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (its share of SMs),
``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (``0=<N>M``: its ``--gpu-mem`` budget in MiB, rounded down, for
device 0, the only one it sees) and ``CUDA_MPS_PIPE_DIRECTORY`` / ``CUDA_MPS_LOG_DIRECTORY`` of the
control daemon the agent runs for that card and user (``agent/mps.py``).

torchrun without flags: each rank is one torchrun *node* driving the rank's GPUs, so torchrun's
environment defaults (``PET_<OPTION>``, read for every option it is not given) are set too:
``PET_NNODES`` = ``WORLD_SIZE``, ``PET_NODE_RANK`` = ``RANK``, ``PET_NPROC_PER_NODE`` = the
rank's device count (1 without devices), ``PET_MASTER_ADDR`` / ``PET_MASTER_PORT`` = rank 0's
``MASTER_ADDR`` / ``MASTER_PORT`` (torchrun's default static rendezvous), ``PET_RDZV_ID`` = the
job's attempt id. ``labgang run -n 2 --nodes 2 -g 4 -- torchrun train.py`` therefore starts one
torchrun per node with 4 processes each, 8 in all. ``LABGANG_CPUS`` (set by the rank's small
parent) is the CPU list the rank may run on, after pinning (``shim.py``).
``USER``, ``LOGNAME`` and ``HOME`` are set to the rank's user, and ``PATH`` gets a default
when none was submitted.

Agent-provided variables (``Supervisor(extra_env=…)``): set by the agent for every rank it
starts, after the submitted environment is filtered and before the contract (so they can
neither be forged by a submission, which loses every ``LABGANG_*``, nor override the contract).
The one the agent uses today:

* ``LABGANG_SIM_SCOPE``: only with a simulated NVML backend, the agent's scope (its resolved
  state dir). Instances simulating the same machine file share device UUIDs; the simulator of
  each instance ignores processes tagged with another scope, so two simulated instances on one
  host do not see each other's ranks as foreign processes (``agent/nvml/simprocs.py``). Never
  set on the real NVML path.

What is dropped, and why. The rank runs as the submitting user after privileges are dropped,
so the submitted environment can only ever affect that user's own processes: the agent and
each rank's small parent never see it (the parent runs ``python -I -S`` with the agent's own
minimal environment). Nothing is dropped "for security" that the user could not do anyway in
their own command line. What *is* dropped are variables that would silently defeat labgang's
own contract when carried over from the submitting shell:

* ``LABGANG_*``: the agent's namespace; a stale ``LABGANG_JOB_ID`` from an enclosing job would lie.
* ``LD_PRELOAD`` and ``LD_AUDIT``: code injected into every process of the job before ``main``
  (profilers, interposers of ``libcuda``/``libnvidia-ml`` that rewrite device visibility),
  typically inherited unknowingly from an interactive shell. A job that wants one says so in
  its command (``env LD_PRELOAD=… prog``), where it is visible in the job record.
* ``NVIDIA_VISIBLE_DEVICES``: a container-runtime knob that contradicts ``CUDA_VISIBLE_DEVICES``.
* ``CUDA_MPS_PIPE_DIRECTORY`` and ``CUDA_MPS_LOG_DIRECTORY``: would connect the rank to another
  MPS control daemon (another user's, or one serving other GPUs) instead of the plain devices
  it was given.

Kept on purpose: ``LD_LIBRARY_PATH`` (CUDA toolkits and conda environments need it, and it only
chooses among libraries the user can load anyway), ``PYTHON*`` (``PYTHONPATH`` is how many
training scripts find their code; ``PYTHONSTARTUP`` only affects interactive interpreters).
"""

from __future__ import annotations

from collections.abc import Mapping

from labgang.agent.mps import MpsDirs

from .identity import RunAs
from .spec import LaunchSpec

MIB = 1024 * 1024

DROPPED_VARIABLES: frozenset[str] = frozenset(
    {
        "LD_PRELOAD",
        "LD_AUDIT",
        "NVIDIA_VISIBLE_DEVICES",
        "CUDA_MPS_PIPE_DIRECTORY",
        "CUDA_MPS_LOG_DIRECTORY",
    }
)
"""Submitted variables never passed to a rank (see the module docstring for why)."""

DROPPED_PREFIXES: tuple[str, ...] = ("LABGANG_",)
"""Submitted variable-name prefixes never passed to a rank."""

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def is_dropped(name: str) -> bool:
    """True when a submitted variable called ``name`` is not passed to the rank."""
    return name in DROPPED_VARIABLES or name.startswith(DROPPED_PREFIXES)


def contract_variables(spec: LaunchSpec) -> dict[str, str]:
    """The variables labgang guarantees to every rank (see the module docstring)."""
    return {
        "CUDA_VISIBLE_DEVICES": ",".join(spec.devices),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "MASTER_ADDR": spec.master_addr,
        "MASTER_PORT": str(spec.master_port),
        "WORLD_SIZE": str(spec.world_size),
        "RANK": str(spec.rank),
        "LOCAL_RANK": str(spec.local_rank),
        "LOCAL_WORLD_SIZE": str(spec.local_world_size),
        "GROUP_RANK": str(spec.node_rank),
        "NODE_RANK": str(spec.node_rank),
        "LABGANG_JOB_ID": spec.user_job_id or spec.job_id,
        "LABGANG_RESTART_COUNT": str(spec.restart_count),
        "PET_NNODES": str(spec.world_size),
        "PET_NODE_RANK": str(spec.rank),
        "PET_NPROC_PER_NODE": str(max(1, len(spec.devices))),
        "PET_MASTER_ADDR": spec.master_addr,
        "PET_MASTER_PORT": str(spec.master_port),
        "PET_RDZV_ID": spec.job_id,
        **(spec.slurm_env or {}),
        **(spec.array_env or {}),
    }


def share_variables(spec: LaunchSpec, mps: MpsDirs | None) -> dict[str, str]:
    """The MPS variables of a rank granted an MPS share (see the module docstring); {} for any other rank.

    Args:
        spec: the rank (``spec.share``).
        mps: the folders of its card's and user's control daemon (``MpsDaemons.acquire``).

    Raises:
        InvalidSpec: an MPS grant without the daemon's folders (the node runs no MPS).
    """
    share = spec.share
    if share is None or share.kind != "mps":
        return {}
    if mps is None:
        from .errors import InvalidSpec

        raise InvalidSpec("share.kind", "is mps but this node runs no MPS control daemon", "shard here")
    out = {
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(share.sm_percent),
        "CUDA_MPS_PIPE_DIRECTORY": mps.pipe,
        "CUDA_MPS_LOG_DIRECTORY": mps.log,
    }
    if share.gpu_mem is not None:
        out["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={max(1, share.gpu_mem // MIB)}M"
    return out


def rank_environment(
    spec: LaunchSpec, run_as: RunAs, extra: Mapping[str, str] | None = None, mps: MpsDirs | None = None
) -> dict[str, str]:
    """Build the full environment of one rank.

    Args:
        spec: the rank; ``spec.env`` is the submitted environment.
        run_as: the credentials it runs with (for ``USER``, ``LOGNAME``, ``HOME``).
        extra: agent-provided variables (see the module docstring), set after the submitted
            ones and before the contract.
        mps: for an MPS rank, its control daemon's folders (:func:`share_variables`).

    Returns:
        name → value, ready for ``execve``.
    """
    env: dict[str, str] = {k: v for k, v in spec.env.items() if not is_dropped(k)}
    env.setdefault("PATH", DEFAULT_PATH)
    env["USER"] = run_as.name
    env["LOGNAME"] = run_as.name
    env["HOME"] = run_as.home
    env.update(extra or {})
    env.update(contract_variables(spec))
    env.update(share_variables(spec, mps))
    return env


def dropped_from(submitted: Mapping[str, str]) -> list[str]:
    """Names in ``submitted`` that ``rank_environment`` drops, sorted (for the job's log header)."""
    return sorted(k for k in submitted if is_dropped(k))
