"""The node agent's configuration (``agent.toml``).

Example::

    node = "gpu01"                          # default: the hostname
    coordinator = "http://coord.lab:7461"   # where the agent dials its link
    token_file = "/etc/labgang/cluster.token"
    address = "10.0.0.11"                   # MASTER_ADDR other nodes use to reach this one
    interval_s = 2.0
    reserve_cpus = 2                        # host CPUs and memory kept from jobs' -c / --mem
    reserve_memory = "8G"

    mps = "auto"                            # MPS control daemons: auto, nvidia, simulated, off

    [supervisor]
    allowed_uids = [1000, 1001]

The agent never imports the launcher, so the state-directory rule is repeated here:
``LABGANG_STATE_DIR``, else ``/var/lib/labgang`` for root, else ``~/.local/state/labgang``.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Annotated, Any, Literal

from labgang.agent import tomlfile
from labgang.agent.mem_size import parse_mem
from labgang.agent.paths import default_state_dir
from labgang.agent.supervisor.config import SupervisorConfig
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator


class AgentConfigError(ValueError):
    """``agent.toml`` is missing, not TOML, or has a bad key (the message names the key path).

    Attributes:
        problems: one line per problem, each starting with the key path (for a file that
            cannot be read: the whole message).
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems) if problems else [message]


def _number(value: object) -> object:
    """Only an ``int`` or ``float`` for a seconds key: never ``true`` or a quoted number such as ``"2"``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        raise ValueError(f"{shown} is not allowed; allowed: a number of seconds")
    return value


Seconds = Annotated[float, BeforeValidator(_number)]
"""Seconds as a TOML number (int or float)."""


NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
"""A node's name: a host name's characters (no ',' or space, which a node list would split)."""


class AgentConfig(BaseModel):
    """One node agent's settings. Times are seconds.

    Attributes:
        node: node name announced to the coordinator (default: hostname).
        coordinator: base URL of the coordinator's TCP listener (``http://host:port``).
        token_file: the cluster token (a file readable only by its owner).
        address: the address ranks on other nodes use for this node (``MASTER_ADDR``);
            default: the node name.
        interval_s: inventory report interval (changes are reported at once).
        sample_s: how often NVML is read to notice changes and free devices.
        state_dir: where the supervisor journal and rank logs live (``<state_dir>/agent``) and
            where the user API socket is (``<state_dir>/labgang.sock``).
        user_socket: serve the user API on this node's Unix socket, forwarding over the link.
        reconnect_max_s: cap of the reconnect backoff.
        simulate: a simulated NVML machine file instead of the real driver.
        supervisor: the ``[supervisor]`` table (uids, root policy, log size).
        reserve_cpus: logical CPUs kept for the system, not offered to jobs' ``-c`` (docs/host-resources.md).
        reserve_memory: host memory kept for the system, a size such as ``"4G"`` (``agent/mem_size.py``).
        cpus, memory: the node's CPUs and memory as offered before the reserve, overriding what
            psutil reads (a size for ``memory``); None: read them.
        mps: who runs the MPS control daemons of MPS ranks (``agent/mps.py``): ``auto`` (the
            simulated one with ``simulate``, else the real one when ``nvidia-cuda-mps-control`` is
            on PATH, else none), ``nvidia``, ``simulated``, ``off``.
        mps_dir: the folder of the daemons' pipe and log folders; None: ``<state_dir>/mps``.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    node: str = Field(default_factory=socket.gethostname)
    coordinator: str = "http://127.0.0.1:7461"
    token_file: str | None = None
    address: str | None = None
    interval_s: Seconds = Field(default=2.0, gt=0, le=300)
    sample_s: Seconds = Field(default=0.5, gt=0, le=60)
    state_dir: str | None = None
    user_socket: bool = True
    reconnect_max_s: Seconds = Field(default=10.0, gt=0)
    simulate: str | None = None
    supervisor: dict[str, Any] = Field(default_factory=dict)
    reserve_cpus: int = Field(default=0, ge=0)
    reserve_memory: str = "0"
    cpus: int | None = Field(default=None, ge=1)
    memory: str | None = None
    mps: Literal["auto", "nvidia", "simulated", "off"] = "auto"
    mps_dir: str | None = None

    @field_validator("node")
    @classmethod
    def _node_name(cls, v: str) -> str:
        if not NODE_NAME.fullmatch(v):
            raise ValueError(
                f"{v!r} is not a node name; allowed: a letter or digit, then letters, digits, '.', '_' or '-' "
                "(a host name: it is one entry of SLURM_JOB_NODELIST and of `labgang nodes`)"
            )
        return v

    @field_validator("mps_dir")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"{v!r} is not an absolute path")
        return v

    @field_validator("reserve_memory", "memory")
    @classmethod
    def _size(cls, v: str | None) -> str | None:
        if v is not None:
            parse_mem(v, zero=True)
        return v

    @field_validator("coordinator")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} must be an http:// or https:// URL")
        return v.rstrip("/")

    @field_validator("supervisor")
    @classmethod
    def _supervisor(cls, v: dict[str, Any]) -> dict[str, Any]:
        SupervisorConfig.from_dict(v)
        return v

    def supervisor_config(self) -> SupervisorConfig:
        """The parsed ``[supervisor]`` table."""
        return SupervisorConfig.from_dict(self.supervisor)

    def resolved_state_dir(self) -> Path:
        """``state_dir`` or the default state directory."""
        return Path(self.state_dir).expanduser() if self.state_dir else default_state_dir()


def parse_agent_config(data: dict[str, Any], source: str = "<agent config>") -> AgentConfig:
    """Validate a parsed ``agent.toml``.

    Raises:
        AgentConfigError: one line per problem, each starting with the key path.
    """
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            if err["type"] == "extra_forbidden":
                lines.append(f"{where}: unknown key; allowed keys: {', '.join(sorted(AgentConfig.model_fields))}")
            else:
                lines.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
        raise AgentConfigError(f"{source}: " + "; ".join(lines), lines) from None


def load_agent_config(path: str | Path) -> AgentConfig:
    """Read and validate ``agent.toml``.

    Raises:
        AgentConfigError: missing or unreadable file, not UTF-8, bad TOML, or a bad key.
    """
    p = Path(path)
    return parse_agent_config(read_toml(p), str(p))


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a user-given TOML file (see :func:`labgang.agent.tomlfile.read_toml`).

    Raises:
        AgentConfigError: one line ``FILE: reason``.
    """
    try:
        return tomlfile.read_toml(path)
    except tomlfile.TomlFileError as exc:
        raise AgentConfigError(str(exc)) from None
