"""``LaunchSpec``: everything the supervisor needs to start one rank of a gang on this node."""

from __future__ import annotations

import base64
import math
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import InvalidSpec

MAX_STDIN_BYTES = 256 * 1024
"""The most standard input a rank is given (``labgang run``'s; ``launcher/stdin_forward.py`` has the same
number for the CLI and the coordinator: the agent imports nothing of the launcher)."""

JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""A job id names directories under the state dir, so it is a plain file-name-safe token."""

_ENV_NAME_RE = re.compile(r"^[^=\x00]+$")
ARRAY_ENV_PREFIXES = ("LABGANG_ARRAY_", "SLURM_ARRAY_")
"""The only names ``LaunchSpec.array_env`` may set (the agent never imports the launcher)."""
SLURM_ENV_PREFIX = "SLURM_"
"""The only names ``LaunchSpec.slurm_env`` may set."""


PICK_PORT = 0
"""``master_port`` on the wire for "not chosen yet": rank 0's agent picks a free port at launch."""

GROUP_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
"""A group name of a job of groups (``launcher``, ``workers``, ``g0``): a letter, then at most 63
letters, digits, ``_`` or ``-``; it names the ``LABGANG_GROUP_<NAME>_ADDR`` variable."""


def group_env_name(name: str) -> str:
    """The ``<NAME>`` part of ``LABGANG_GROUP_<NAME>_ADDR`` for group ``name``: upper case,
    ``-`` as ``_`` (``data-loader`` -> ``DATA_LOADER``)."""
    return name.upper().replace("-", "_")


DEFAULT_RANK_UMASK = 0o022
"""The umask of a rank whose launch spec carries none (sent by a coordinator from before it did)."""


@dataclass(frozen=True)
class LaunchGroup:
    """The group of a job of groups one rank belongs to (issue 27; ``docs/group-lifecycle.md``).

    Attributes:
        name: the rank's group (``LABGANG_GROUP``), matching :data:`GROUP_NAME_RE`.
        rank: the rank's index within its group, ``0 <= rank < size`` (``LABGANG_GROUP_RANK``).
        size: how many ranks the group has (``LABGANG_GROUP_SIZE``), ``>= 1``.
        addrs: every group of the job, in group order, with the host of its rank 0 (a name or
            address, no spaces): ``LABGANG_GROUP_<NAME>_ADDR`` each, and ``LABGANG_GROUPS`` the
            names comma-separated. Holds ``name``; no two names share an :func:`group_env_name`.

    Raises:
        InvalidSpec: on construction, naming the first malformed field (``group.<field>``).
    """

    name: str
    rank: int
    size: int
    addrs: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if isinstance(self.addrs, Mapping):
            object.__setattr__(self, "addrs", tuple(self.addrs.items()))
        elif isinstance(self.addrs, (list, tuple)):
            object.__setattr__(self, "addrs", tuple(tuple(pair) for pair in self.addrs))
        allowed = "a letter, then up to 63 letters, digits, _ or -"
        if not isinstance(self.name, str) or not GROUP_NAME_RE.match(self.name):
            raise InvalidSpec("group.name", f"{self.name!r} is not a group name", allowed)
        if not _is_int(self.size) or self.size < 1:
            raise InvalidSpec("group.size", f"{self.size!r} is not a positive integer", "integer >= 1")
        if not _is_int(self.rank) or not 0 <= self.rank < self.size:
            raise InvalidSpec("group.rank", f"{self.rank!r} is out of range", f"0..{self.size - 1}")
        seen: set[str] = set()
        for pair in self.addrs:
            if len(pair) != 2:
                raise InvalidSpec("group.addrs", f"{pair!r} is not a (group, host) pair", "group name -> host")
            group, host = pair
            if not isinstance(group, str) or not GROUP_NAME_RE.match(group):
                raise InvalidSpec("group.addrs", f"{group!r} is not a group name", allowed)
            if group_env_name(group) in seen:
                raise InvalidSpec(
                    "group.addrs", f"{group!r} repeats a group's variable name", "group names distinct after - -> _"
                )
            seen.add(group_env_name(group))
            if not isinstance(host, str) or not host or any(c.isspace() for c in host):
                raise InvalidSpec(
                    "group.addrs", f"{host!r} of group {group} is not a host", "non-empty host name or IP address"
                )
        if self.name not in dict(self.addrs):
            raise InvalidSpec("group.addrs", f"does not name the rank's group {self.name}", "every group of the job")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"name", "rank", "size", "addrs": {group: host, ...}}`` (group order kept)."""
        return {"name": self.name, "rank": self.rank, "size": self.size, "addrs": dict(self.addrs)}

    @classmethod
    def from_dict(cls, data: Any) -> LaunchGroup:
        """Read back :meth:`to_dict` output.

        Raises:
            InvalidSpec: not an object of exactly those four fields, or a malformed value.
        """
        fields = ("name", "rank", "size", "addrs")
        if not isinstance(data, Mapping) or set(data) != set(fields):
            raise InvalidSpec("group", f"{data!r} is not a rank's group", "an object of " + ", ".join(fields))
        if not isinstance(data["addrs"], Mapping):
            raise InvalidSpec("group.addrs", f"{data['addrs']!r} is not an object", "group name -> host")
        return cls(name=data["name"], rank=data["rank"], size=data["size"], addrs=tuple(data["addrs"].items()))

    def variables(self) -> dict[str, str]:
        """The ``LABGANG_GROUP*`` variables of the rank (``environment.py``'s contract)."""
        return {
            "LABGANG_GROUP": self.name,
            "LABGANG_GROUP_RANK": str(self.rank),
            "LABGANG_GROUP_SIZE": str(self.size),
            "LABGANG_GROUPS": ",".join(group for group, _ in self.addrs),
            **{f"LABGANG_GROUP_{group_env_name(group)}_ADDR": host for group, host in self.addrs},
        }


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


SHARE_KINDS = ("shard", "mps")
"""How a rank shares its one card: ``shard`` = time-sliced, ``mps`` = through the card's MPS server."""


@dataclass(frozen=True, eq=True)
class ShareGrant:
    """The part of one card a sharing rank was granted (``--shards``/``--mps``/``--gpu-mem``).

    Attributes:
        kind: ``"shard"`` (time-sliced: nothing partitions the card) or ``"mps"`` (a client of the
            card's MPS server, one server per user).
        shards: for ``shard``, how many of the card's shards the rank holds, ``>= 1``; for ``mps``
            always 0 (an MPS grant is ``sm_percent``).
        sm_percent: for ``mps``, the share of the card's SMs, 1..100, given to the rank as
            ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``; ``None`` for ``shard``.
        gpu_mem: the rank's device-memory budget in bytes (``--gpu-mem``), ``>= 1``, or ``None`` =
            no budget. Under MPS it becomes ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``; for shards the
            agent watches it through NVML (or sets it on the rank's cgroup where the driver can).

    Raises:
        InvalidSpec: on construction, naming ``share.<field>`` and the allowed values.
    """

    kind: str
    shards: int = 0
    sm_percent: int | None = None
    gpu_mem: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in SHARE_KINDS:
            raise InvalidSpec("share.kind", f"{self.kind!r} is not a way to share a card", " or ".join(SHARE_KINDS))
        if self.kind == "shard":
            if not _is_int(self.shards) or self.shards < 1:
                raise InvalidSpec("share.shards", f"{self.shards!r} is not a number of shards", "an integer >= 1")
            if self.sm_percent is not None:
                raise InvalidSpec("share.sm_percent", "is set on a shard grant", "null unless kind is mps")
        else:
            if self.shards != 0 or not _is_int(self.shards):
                raise InvalidSpec("share.shards", f"{self.shards!r} is set on an mps grant", "0 when kind is mps")
            sm = self.sm_percent
            if sm is None or not _is_int(sm) or not 1 <= sm <= 100:
                raise InvalidSpec("share.sm_percent", f"{self.sm_percent!r} is not a percentage of SMs", "1..100")
        if self.gpu_mem is not None and not (_is_int(self.gpu_mem) and self.gpu_mem >= 1):
            raise InvalidSpec("share.gpu_mem", f"{self.gpu_mem!r} is not a number of bytes", "an integer >= 1, or null")

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready wire form; ``from_dict`` inverts it exactly."""
        return {"kind": self.kind, "shards": self.shards, "sm_percent": self.sm_percent, "gpu_mem": self.gpu_mem}

    @classmethod
    def from_dict(cls, data: Any) -> ShareGrant:
        """Build a grant from ``to_dict()`` output.

        Raises:
            InvalidSpec: ``data`` is not an object, has an unknown field, lacks ``kind``, or a value is malformed.
        """
        if not isinstance(data, Mapping):
            raise InvalidSpec(
                "share", f"{data!r} is not a share grant", "an object of kind, shards, sm_percent, gpu_mem"
            )
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidSpec(f"share.{unknown[0]}", "is not a share grant field", ", ".join(sorted(known)))
        if "kind" not in data:
            raise InvalidSpec("share.kind", "is missing", " or ".join(SHARE_KINDS))
        return cls(**data)


@dataclass(frozen=True, eq=True)
class LaunchSpec:
    """One rank of a gang, as the coordinator asks this node's agent to start it.

    Attributes:
        job_id: the id this rank is supervised under (the coordinator uses one per attempt, ``12.0``);
            ``[A-Za-z0-9][A-Za-z0-9._-]*``, at most 128 characters.
        rank: global rank, ``0 <= rank < world_size`` (``RANK``).
        local_rank: rank among this job's ranks on this node (``LOCAL_RANK``).
        world_size: number of ranks in the gang (``WORLD_SIZE``).
        local_world_size: number of this job's ranks on this node (``LOCAL_WORLD_SIZE``).
        node_rank: index of this node among the job's nodes (``NODE_RANK`` and ``GROUP_RANK``).
        master_addr: host of rank 0 (``MASTER_ADDR``).
        master_port: TCP port, 1–65535, that was free on rank 0's node (``MASTER_PORT``); ``None``
            = not chosen yet: the first node of a run, whose agent picks a free port (or the one its
            ranks of the run already use) before it starts the rank (:meth:`with_master_port`).
            On the wire ``None`` is 0. A rank is never started without a port.
        devices: device UUIDs (``GPU-…`` or ``MIG-…``) handed to the rank in ``CUDA_VISIBLE_DEVICES``;
            may be empty for a CPU-only rank.
        argv: the command, ``argv[0]`` looked up in the rank's ``PATH``.
        env: the submitted environment (see ``environment.py`` for what is dropped and added).
        cwd: absolute working directory of the rank.
        uid: the submitting user's uid; the rank runs as this user.
        gid: primary group to run with; ``None`` = the user's primary group from the passwd database.
        restart_count: how many times this job was restarted (``LABGANG_RESTART_COUNT``).
        grace: seconds between SIGTERM and SIGKILL when the rank is stopped; ``>= 0``.
        warn_signal: signal number sent ``warn_before`` seconds before SIGTERM on a stop
            (Slurm's ``--signal=SIG@seconds``), or ``None``.
        warn_before: seconds between the warning signal and SIGTERM; ``>= 0``.
        warn_shell_only: the warning goes to the rank's own process alone (Slurm's
            ``--signal B:``, the batch shell), not its process group. Serialised only when set.
        user_job_id: the job id people see in ``labgang queue``, given to the rank as
            ``LABGANG_JOB_ID``; ``None`` = ``job_id``.
        cpus: CPU numbers the rank's small parent pins it to (``sched_setaffinity``, inherited
            by the rank): its GPUs' NUMA node CPUs; ``None`` = not pinned (``--cpu-bind none``,
            or no CPU facts). Serialised only when set.
        array_env: for a task of a job array, the array variables the coordinator computed
            (``LABGANG_ARRAY_*`` and ``SLURM_ARRAY_*`` names only: job id, task id, count, min,
            max, step; docs/arrays.md), set like the rest of the contract; ``None`` otherwise.
            Serialised only when set.
        slurm_env: the ``SLURM_*`` variables Slurm sets for a batch step that labgang can honour
            (``SLURM_JOB_ID``, ``SLURM_PROCID``, ``SLURM_JOB_NODELIST``...; docs/slurm.md), computed
            by the coordinator for this rank and set like the rest of the contract; ``None`` =
            none (an older coordinator). Serialised only when set.
        output_path, error_path: ``--output``/``--error``: absolute file names the rank's stdout
            (and stderr, into ``output_path`` unless ``error_path`` is set) are also written to, as
            the rank's user (``shim.py``); None = only the log. Serialised only when set.
        stdin: the rank's standard input, base64 (``labgang run``'s, for rank 0; at most
            ``MAX_STDIN_BYTES`` decoded); ``None`` = ``/dev/null``. Serialised only when set.
        pty: run the rank on a pseudo-terminal fed by ``pty_input`` (``labgang run --pty``, rank 0).
            Serialised only when True.
        stdin_stream: the rank's standard input is a pipe fed by ``stdin_input`` as the CLI sends
            it (``labgang run``'s own stdin, streamed with backpressure: ``stdinrelay.py``; rank 0).
            Serialised only when True.
        cpu_limit: CPUs the rank may use (``-c``), written to its cgroup's ``cpu.max`` where the
            agent enforces host limits (``agent/confine/hostlimits.py``); ``None`` = no limit.
            Serialised only when set.
        memory_limit: bytes of host memory the rank may use (its share of ``--mem``, or
            ``--mem-per-gpu`` × its devices), written to ``memory.max`` likewise; ``None`` = no
            limit. Serialised only when set.
        share: the part of one card this rank shares (:class:`ShareGrant`); ``devices`` is then
            that one card's ``GPU-…`` UUID (never a MIG device). ``None`` = the rank has its devices
            to itself. Serialised only when set.
        group: for a rank of a job of groups, its group (:class:`LaunchGroup`: name, rank and size
            in the group, every group's rank-0 host); ``rank``/``world_size`` are then global over
            all groups in group order. ``None`` = a job of one shape. Serialised only when set.
        log_hold: ``labgang run`` follows this rank's log live: its rotation waits until the follower has
            read the older file (``log_generations.py``), from the start, before its first read. False:
            the log rotates at its cap whatever was read. Serialised only when True.
        umask: the file mode creation mask the rank's process gets before its command runs (the
            submitter's, ``0`` to ``0o777``) and its ``--output``/``--error`` files are created
            with; ``None`` = ``0o022`` (a coordinator from before it was sent). Serialised only
            when set.

    Raises:
        InvalidSpec: on construction, naming the first malformed field and the allowed values.
    """

    job_id: str
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    master_addr: str
    master_port: int | None
    devices: tuple[str, ...]
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(hash=False)
    cwd: str
    uid: int
    gid: int | None = None
    restart_count: int = 0
    grace: float = 10.0
    warn_signal: int | None = None
    warn_before: float = 0.0
    warn_shell_only: bool = False
    user_job_id: str | None = None
    cpus: tuple[int, ...] | None = None
    array_env: Mapping[str, str] | None = field(default=None, hash=False)
    slurm_env: Mapping[str, str] | None = field(default=None, hash=False)
    output_path: str | None = None
    error_path: str | None = None
    stdin: str | None = field(default=None, hash=False, repr=False)
    pty: bool = False
    stdin_stream: bool = False
    cpu_limit: int | None = None
    memory_limit: int | None = None
    share: ShareGrant | None = None
    group: LaunchGroup | None = None
    log_hold: bool = False
    umask: int | None = None

    def __post_init__(self) -> None:
        if self.cpus is not None and isinstance(self.cpus, (list, tuple)):
            object.__setattr__(self, "cpus", tuple(self.cpus))
        object.__setattr__(self, "devices", tuple(self.devices))
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "env", dict(self.env))
        if isinstance(self.array_env, Mapping):
            object.__setattr__(self, "array_env", dict(self.array_env))
        if isinstance(self.slurm_env, Mapping):
            object.__setattr__(self, "slurm_env", dict(self.slurm_env))
        if isinstance(self.group, Mapping):
            object.__setattr__(self, "group", LaunchGroup.from_dict(self.group))
        self._validate()

    def _validate(self) -> None:
        if not isinstance(self.pty, bool):
            raise InvalidSpec("pty", f"{self.pty!r} is not true or false", "true or false")
        if not isinstance(self.log_hold, bool):
            raise InvalidSpec("log_hold", f"{self.log_hold!r} is not true or false", "true or false")
        if not isinstance(self.warn_shell_only, bool):
            raise InvalidSpec("warn_shell_only", f"{self.warn_shell_only!r} is not true or false", "true or false")
        if not isinstance(self.stdin_stream, bool):
            raise InvalidSpec("stdin_stream", f"{self.stdin_stream!r} is not true or false", "true or false")
        if self.stdin_stream and (self.pty or self.stdin is not None):
            raise InvalidSpec("stdin_stream", "a streamed stdin excludes pty and stdin", "false with pty or stdin")
        if self.stdin is not None:
            try:
                size = len(base64.b64decode(self.stdin, validate=True)) if isinstance(self.stdin, str) else -1
            except ValueError:
                size = -1
            if not 0 <= size <= MAX_STDIN_BYTES:
                raise InvalidSpec(
                    "stdin", "is not base64 of at most the allowed size", f"base64 of at most {MAX_STDIN_BYTES} bytes"
                )
        if self.user_job_id is not None and (
            not isinstance(self.user_job_id, str) or not JOB_ID_RE.match(self.user_job_id)
        ):
            raise InvalidSpec(
                "user_job_id",
                f"{self.user_job_id!r} is not a valid job id",
                "[A-Za-z0-9][A-Za-z0-9._-]*, at most 128 characters, or null",
            )
        if not isinstance(self.job_id, str) or not JOB_ID_RE.match(self.job_id):
            raise InvalidSpec(
                "job_id",
                f"{self.job_id!r} is not a valid job id",
                "1-128 characters of A-Z a-z 0-9 . _ -, not starting with . _ or -",
            )
        for name in ("world_size", "local_world_size"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise InvalidSpec(name, f"{value!r} is not a positive integer", "integer >= 1")
        if not _is_int(self.rank) or not 0 <= self.rank < self.world_size:
            raise InvalidSpec("rank", f"{self.rank!r} is out of range", f"0..{self.world_size - 1}")
        if not _is_int(self.local_rank) or not 0 <= self.local_rank < self.local_world_size:
            raise InvalidSpec("local_rank", f"{self.local_rank!r} is out of range", f"0..{self.local_world_size - 1}")
        if self.local_world_size > self.world_size:
            raise InvalidSpec(
                "local_world_size", f"{self.local_world_size} exceeds world_size", f"1..{self.world_size}"
            )
        if not _is_int(self.node_rank) or self.node_rank < 0:
            raise InvalidSpec("node_rank", f"{self.node_rank!r} is not a non-negative integer", "integer >= 0")
        if not isinstance(self.master_addr, str) or not self.master_addr or any(c.isspace() for c in self.master_addr):
            raise InvalidSpec(
                "master_addr",
                f"{self.master_addr!r} is not a host name or address",
                "non-empty host name or IP address",
            )
        if self.master_port is not None and (not _is_int(self.master_port) or not 1 <= self.master_port <= 65535):
            raise InvalidSpec("master_port", f"{self.master_port!r} is not a TCP port", "1..65535, or 0 = pick one")
        for uuid in self.devices:
            if not isinstance(uuid, str) or not uuid or "," in uuid or any(c.isspace() for c in uuid):
                raise InvalidSpec("devices", f"{uuid!r} is not a device UUID", "GPU-… or MIG-… UUID strings")
        if self.cpus is not None and (
            not isinstance(self.cpus, tuple) or not self.cpus or not all(_is_int(c) and c >= 0 for c in self.cpus)
        ):
            raise InvalidSpec(
                "cpus", f"{self.cpus!r} is not a list of CPU numbers", "a non-empty list of integers >= 0, or null"
            )
        for name in ("cpu_limit", "memory_limit"):
            value = getattr(self, name)
            if value is not None and not (_is_int(value) and value >= 1):
                raise InvalidSpec(name, f"{value!r} is not a positive amount", "an integer >= 1, or null")
        if self.share is not None:
            if not isinstance(self.share, ShareGrant):
                raise InvalidSpec("share", f"{self.share!r} is not a share grant", "a ShareGrant, or null")
            if len(self.devices) != 1 or not self.devices[0].upper().startswith("GPU-"):
                raise InvalidSpec(
                    "devices", f"{list(self.devices)!r} is not one whole card for a shared rank", "one GPU-… UUID"
                )
        if self.array_env is not None and (
            not isinstance(self.array_env, dict)
            or not all(
                isinstance(k, str) and k.startswith(ARRAY_ENV_PREFIXES) and isinstance(v, str) and "\x00" not in v
                for k, v in self.array_env.items()
            )
        ):
            raise InvalidSpec(
                "array_env",
                f"{self.array_env!r} is not a map of array variables",
                "names starting with " + " or ".join(ARRAY_ENV_PREFIXES) + " to strings, or null",
            )
        if self.slurm_env is not None and (
            not isinstance(self.slurm_env, dict)
            or not all(
                isinstance(k, str)
                and k.startswith(SLURM_ENV_PREFIX)
                and _ENV_NAME_RE.match(k)
                and isinstance(v, str)
                and "\x00" not in v
                for k, v in self.slurm_env.items()
            )
        ):
            raise InvalidSpec(
                "slurm_env",
                f"{self.slurm_env!r} is not a map of Slurm variables",
                f"names starting with {SLURM_ENV_PREFIX} to strings, or null",
            )
        if self.group is not None:
            if not isinstance(self.group, LaunchGroup):
                raise InvalidSpec("group", f"{self.group!r} is not a rank's group", "name, rank, size, addrs, or null")
            if self.group.size > self.world_size:
                raise InvalidSpec("group.size", f"{self.group.size} exceeds world_size", f"1..{self.world_size}")
        if self.umask is not None and not (_is_int(self.umask) and 0 <= self.umask <= 0o777):
            raise InvalidSpec("umask", f"{self.umask!r} is not a umask", "an integer from 0 to 0o777 (511), or null")
        for name in ("output_path", "error_path"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.startswith("/") or "\x00" in value):
                raise InvalidSpec(name, f"{value!r} is not an absolute file name", "an absolute path, or null")
        if not self.argv:
            raise InvalidSpec("argv", "is empty", "a non-empty list of strings")
        for arg in self.argv:
            if not isinstance(arg, str) or "\x00" in arg:
                raise InvalidSpec("argv", f"{arg!r} is not a string without NUL bytes", "strings")
        if not self.argv[0]:
            raise InvalidSpec("argv", "argv[0] is empty", "a program name or path")
        for key, value in self.env.items():
            if not isinstance(key, str) or not _ENV_NAME_RE.match(key):
                raise InvalidSpec("env", f"variable name {key!r} is invalid", "names without '=' or NUL")
            if not isinstance(value, str) or "\x00" in value:
                raise InvalidSpec("env", f"value of {key} is not a string without NUL bytes", "strings")
        if not isinstance(self.cwd, str) or not self.cwd.startswith("/") or "\x00" in self.cwd:
            raise InvalidSpec("cwd", f"{self.cwd!r} is not an absolute path", "an absolute path")
        if not _is_int(self.uid) or self.uid < 0:
            raise InvalidSpec("uid", f"{self.uid!r} is not a uid", "integer >= 0")
        if self.gid is not None and (not _is_int(self.gid) or self.gid < 0):
            raise InvalidSpec("gid", f"{self.gid!r} is not a gid", "integer >= 0 or null")
        if not _is_int(self.restart_count) or self.restart_count < 0:
            raise InvalidSpec("restart_count", f"{self.restart_count!r} is negative or not an integer", "integer >= 0")
        for name in ("grace", "warn_before"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InvalidSpec(name, f"{value!r} is not a finite number of seconds >= 0", "seconds >= 0")
        if self.warn_signal is not None:
            valid = {int(s) for s in signal.Signals}
            if not _is_int(self.warn_signal) or self.warn_signal not in valid:
                raise InvalidSpec(
                    "warn_signal",
                    f"{self.warn_signal!r} is not a signal number",
                    "a signal number such as 10 (SIGUSR1), or null",
                )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (lists for tuples, :data:`PICK_PORT` for a port not chosen yet);
        ``from_dict`` inverts it exactly."""
        return {
            "job_id": self.job_id,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "world_size": self.world_size,
            "local_world_size": self.local_world_size,
            "node_rank": self.node_rank,
            "master_addr": self.master_addr,
            "master_port": self.master_port or PICK_PORT,
            "devices": list(self.devices),
            "argv": list(self.argv),
            "env": dict(self.env),
            "cwd": self.cwd,
            "uid": self.uid,
            "gid": self.gid,
            "restart_count": self.restart_count,
            "grace": self.grace,
            "warn_signal": self.warn_signal,
            "warn_before": self.warn_before,
            "user_job_id": self.user_job_id,
            **({"cpus": list(self.cpus)} if self.cpus is not None else {}),
            **({"array_env": dict(self.array_env)} if self.array_env is not None else {}),
            **({"slurm_env": dict(self.slurm_env)} if self.slurm_env is not None else {}),
            **({"output_path": self.output_path} if self.output_path is not None else {}),
            **({"error_path": self.error_path} if self.error_path is not None else {}),
            **({"stdin": self.stdin} if self.stdin is not None else {}),
            **({"pty": True} if self.pty else {}),
            **({"warn_shell_only": True} if self.warn_shell_only else {}),
            **({"stdin_stream": True} if self.stdin_stream else {}),
            **({"cpu_limit": self.cpu_limit} if self.cpu_limit is not None else {}),
            **({"memory_limit": self.memory_limit} if self.memory_limit is not None else {}),
            **({"share": self.share.to_dict()} if self.share is not None else {}),
            **({"group": self.group.to_dict()} if self.group is not None else {}),
            **({"log_hold": True} if self.log_hold else {}),
            **({"umask": self.umask} if self.umask is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LaunchSpec:
        """Build a spec from ``to_dict()`` output.

        Raises:
            InvalidSpec: a required field is missing, an unknown field is present, or a value is malformed.
        """
        if not isinstance(data, Mapping):
            raise InvalidSpec("spec", f"a {type(data).__name__} is not a launch spec", "an object of LaunchSpec fields")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidSpec(unknown[0], "is not a LaunchSpec field", ", ".join(sorted(known)))
        required = (
            "job_id",
            "rank",
            "local_rank",
            "world_size",
            "local_world_size",
            "node_rank",
            "master_addr",
            "master_port",
            "devices",
            "argv",
            "env",
            "cwd",
            "uid",
        )
        for name in required:
            if name not in data:
                raise InvalidSpec(name, "is missing", "required field")
        kwargs = dict(data)
        for name in ("devices", "argv"):
            if not isinstance(kwargs[name], (list, tuple)):
                raise InvalidSpec(name, f"{kwargs[name]!r} is not a list", "a list of strings")
        if not isinstance(kwargs["env"], Mapping):
            raise InvalidSpec("env", f"{kwargs['env']!r} is not a mapping", "an object of strings")
        if kwargs["master_port"] == PICK_PORT and _is_int(kwargs["master_port"]):
            kwargs["master_port"] = None
        if kwargs.get("share") is not None:
            kwargs["share"] = ShareGrant.from_dict(kwargs["share"])
        return cls(**kwargs)

    def with_master_port(self, port: int) -> LaunchSpec:
        """This spec with ``master_port`` chosen (the first node of a run picks it at launch).

        Raises:
            InvalidSpec: ``port`` is not 1..65535.
        """
        return replace(self, master_port=port)
