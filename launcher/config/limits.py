"""The ``[limits]`` table of ``cluster.toml``: how big one submission may be, how much one page
of a listing holds, and how many connections (and for how long) one client may hold.

Documented with defaults in ``config/cluster.toml`` and docs/security.md; enforced by
:mod:`labgang.launcher.coordinator.requests` (sizes), the ``GET /v1/jobs`` handler (pages)
and :mod:`labgang.agent.connguard` (connections).
"""

from __future__ import annotations

from labgang.launcher.arrays import ARRAY_SIZE_CEILING
from pydantic import BaseModel, ConfigDict, Field

MAX_WORKERS = 4096
"""Most ranks (and ``--nodes``, ``--min-workers``) one gang may ask for: submissions and scenario files."""
MAX_GPUS_PER_WORKER = 64
"""Most full GPUs one rank may ask for (a rank lives on one node)."""
MAX_TIME_LIMIT_S = 365 * 86400
"""The longest ``--time`` (``time_limit_s``): 365 days, in seconds (docs/openapi.json ``maximum``)."""


class LimitsConfig(BaseModel):
    """The ``[limits]`` table: the most one submission may carry, and one page of a listing.

    Sizes are bytes of UTF-8 (``argv`` counts each word plus its terminating NUL, as
    ``execve`` does; ``env`` counts ``NAME=value`` plus its NUL). The defaults fit any
    real command line (Linux allows 128 KiB per word) and keep one job's record, and so
    every listing, small. ``max_array_size`` is Slurm's ``MaxArraySize``: a job array's
    indices are below it, so it has at most that many tasks (docs/arrays.md). The
    connection caps and timeouts bound what one client can hold open
    (:mod:`labgang.agent.connguard`): a TCP peer is an IP address, a Unix-socket peer a
    uid (root exempt from the per-peer cap).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_argv_bytes: int = Field(strict=True, default=128 * 1024, ge=1, le=2 * 1024 * 1024)
    max_env_bytes: int = Field(strict=True, default=128 * 1024, ge=0, le=2 * 1024 * 1024)
    max_name_chars: int = Field(strict=True, default=200, ge=1, le=4096)
    max_cwd_bytes: int = Field(strict=True, default=4096, ge=1, le=4096)
    max_spec_bytes: int = Field(strict=True, default=512 * 1024, ge=1024, le=16 * 1024 * 1024)
    max_array_size: int = Field(strict=True, default=10_001, ge=1, le=ARRAY_SIZE_CEILING)
    page_size: int = Field(strict=True, default=2000, ge=1, le=100_000)
    max_page_bytes: int = Field(strict=True, default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)
    max_connections: int = Field(strict=True, default=2048, ge=1)
    max_connections_per_peer: int = Field(strict=True, default=64, ge=1)
    header_timeout_s: float = Field(strict=True, default=10.0, gt=0, le=3600)
    body_timeout_s: float = Field(strict=True, default=30.0, gt=0, le=3600)
    idle_timeout_s: float = Field(strict=True, default=60.0, gt=0, le=86400)
