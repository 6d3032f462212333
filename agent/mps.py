"""The MPS control daemons of this node's shared cards, started and stopped behind one seam.

A rank granted an MPS share (``LaunchSpec.share.kind == "mps"``) is a client of its card's MPS
server. The control daemon starts a server with the uid of the first client that connects, and a
client of another uid waits until that server's clients are all gone (docs in
``/work/shared/NVML-NOTES.md``, "Sharing a GPU"): so the agent runs one control daemon per
(card, user), each with its own pipe and log folders (``CUDA_MPS_PIPE_DIRECTORY``,
``CUDA_MPS_LOG_DIRECTORY``), started when that user's first MPS rank on the card starts and
stopped when its last one is gone (:class:`MpsDaemons`).

How a daemon is started and stopped is the seam (:class:`MpsControl`):

* :class:`NvidiaMpsControl`: the real ``nvidia-cuda-mps-control -d`` as the rank's user, with
  ``CUDA_VISIBLE_DEVICES`` = the card's UUID and the two folders in its environment; stopped
  with ``quit`` on its standard input, as ``echo quit | nvidia-cuda-mps-control`` does.
* :class:`SimulatedMpsControl`: a small real process (``python -m labgang.agent.mps_sim``) that
  makes the pipe folder, a ``control`` FIFO and a log, and ends on ``quit`` written to that FIFO
  (or SIGTERM): tests exercise real spawning and reaping without a GPU.

The agent's ``mps`` setting (``agent.toml``) says which: ``auto`` (the simulated one with a
simulated NVML, the real one where ``nvidia-cuda-mps-control`` is on the agent's PATH, else
none), ``nvidia``, ``simulated`` or ``off`` (:func:`open_mps_control`). Without one, an MPS rank
is refused at launch with a one-line reason.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil
from labgang.agent.inventory import NodeInventory, ProcessInfo

log = logging.getLogger(__name__)

MPS_SETTINGS = ("auto", "nvidia", "simulated", "off")
"""The agent's ``mps`` setting (see the module docstring)."""
CONTROL_PROGRAM = "nvidia-cuda-mps-control"
STOP_TIMEOUT_S = 10.0
"""How long a daemon is given to end after ``quit`` before it is killed (the simulated one) or
given up on (the real one, logged)."""


class MpsUnavailable(OSError):
    """A card's MPS control daemon did not start (the rank cannot be started, like a failed spawn)."""


@dataclass(frozen=True, slots=True)
class MpsDirs:
    """One control daemon's folders (absolute paths).

    Attributes:
        pipe: ``CUDA_MPS_PIPE_DIRECTORY``: where the daemon and its clients talk.
        log: ``CUDA_MPS_LOG_DIRECTORY``: the daemon's ``control.log`` and the server's ``server.log``.
    """

    pipe: str
    log: str


def mps_dirs(root: Path, card: str, uid: int) -> MpsDirs:
    """The folders of the daemon serving ``uid`` on ``card`` (a ``GPU-…`` UUID) under ``root``:
    ``<root>/<uuid without GPU->/<uid>/pipe`` and ``…/log`` (short: the pipe folder holds Unix
    sockets, whose paths may not pass 107 bytes)."""
    base = Path(root) / card.removeprefix("GPU-").removeprefix("gpu-") / str(uid)
    return MpsDirs(str(base / "pipe"), str(base / "log"))


def daemon_environment(card: str, dirs: MpsDirs) -> dict[str, str]:
    """The environment a card's control daemon (and ``quit``) runs with: the card by UUID, its folders."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "CUDA_VISIBLE_DEVICES": card,
        "CUDA_MPS_PIPE_DIRECTORY": dirs.pipe,
        "CUDA_MPS_LOG_DIRECTORY": dirs.log,
    }


class MpsControl(Protocol):
    """How one control daemon is started and stopped (the seam; see the module docstring)."""

    name: str
    """``"nvidia"`` or ``"simulated"`` (``labgang nodes`` shows it)."""

    def start(self, card: str, uid: int, gid: int, dirs: MpsDirs) -> None:
        """Start the daemon for ``uid`` on ``card`` with ``dirs`` (made, owned by ``uid``, beforehand).

        Raises:
            MpsUnavailable: it did not start (the message says why).
        """

    def stop(self, card: str, uid: int, gid: int, dirs: MpsDirs) -> None:
        """Stop that daemon and wait for it to end (bounded by :data:`STOP_TIMEOUT_S`)."""

    def pids(self) -> set[int]:
        """The pids of the MPS processes it runs (control daemons and servers): never foreign."""

    def daemon_of(self, pid: int) -> tuple[str, int] | None:
        """(card UUID, uid) of the daemon whose process ``pid`` is, where the seam knows it (the
        simulated one, which runs every daemon as the agent); None where the process's own uid
        tells whose it is (the real server runs as its user)."""


def _as_user(uid: int, gid: int) -> tuple[int | None, int | None, list[int] | None]:
    """Popen's ``user``, ``group``, ``extra_groups`` to run as ``uid`` when the agent is root (else as itself)."""
    if os.geteuid() == 0 and uid != 0:
        return uid, gid, []
    return None, None, None


class NvidiaMpsControl:
    """The real ``nvidia-cuda-mps-control``, found on the agent's PATH (or at ``program``)."""

    name = "nvidia"

    def __init__(self, program: str = CONTROL_PROGRAM) -> None:
        self.program = program

    def start(self, card: str, uid: int, gid: int, dirs: MpsDirs) -> None:
        """``nvidia-cuda-mps-control -d`` as ``uid``; it forks its daemon and returns.

        Raises:
            MpsUnavailable: the program is missing or exits non-zero (with its output).
        """
        user, group, extra = _as_user(uid, gid)
        try:
            done = subprocess.run(
                [self.program, "-d"],
                env=daemon_environment(card, dirs),
                capture_output=True,
                timeout=STOP_TIMEOUT_S,
                check=False,
                user=user,
                group=group,
                extra_groups=extra,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MpsUnavailable(f"{self.program} -d for card {card}: {exc}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).decode(errors="replace").strip()
            raise MpsUnavailable(f"{self.program} -d for card {card} exited {done.returncode}: {said}")

    def stop(self, card: str, uid: int, gid: int, dirs: MpsDirs) -> None:
        """``quit`` to the daemon (``echo quit | nvidia-cuda-mps-control`` with its folders)."""
        user, group, extra = _as_user(uid, gid)
        try:
            subprocess.run(
                [self.program],
                input=b"quit\n",
                env=daemon_environment(card, dirs),
                capture_output=True,
                timeout=STOP_TIMEOUT_S,
                check=False,
                user=user,
                group=group,
                extra_groups=extra,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("MPS control daemon of uid %s on %s did not take quit: %s", uid, card, exc)

    def pids(self) -> set[int]:
        """The running ``nvidia-cuda-mps-control`` and ``nvidia-cuda-mps-server`` processes (psutil)."""
        names = {CONTROL_PROGRAM, "nvidia-cuda-mps-server"}
        return {p.info["pid"] for p in psutil.process_iter(["pid", "name"]) if p.info["name"] in names}

    def daemon_of(self, pid: int) -> tuple[str, int] | None:
        """None: a real MPS server runs as the user it serves (its uid says whose it is)."""
        return None


class SimulatedMpsControl:
    """A small real process per daemon (``labgang.agent.mps_sim``), kept as the agent's child and reaped.

    It runs as the agent (a user may not be able to run the agent's interpreter); when the agent is
    root, the daemon hands its ``control`` FIFO, log and folders to the user it serves.

    Its start waits for the daemon's ``serving`` line (its FIFO exists), never a fixed time. The
    daemon's environment marks it as its card's MPS server for the simulated NVML
    (``SIM_MPS_ROLE=server``, no memory of its own: ``agent/nvml/simshare.py``) and carries the
    agent's simulation scope (``LABGANG_SIM_SCOPE``), so other simulated instances ignore it.

    Args:
        scope: the agent's simulation scope; None = this process's ``LABGANG_SIM_SCOPE``, if any.
    """

    name = "simulated"

    def __init__(self, scope: str | None = None) -> None:
        self._scope = scope if scope is not None else os.environ.get("LABGANG_SIM_SCOPE")
        self._procs: dict[tuple[str, int], subprocess.Popen[bytes]] = {}

    def start(self, card: str, uid: int, gid: int, dirs: MpsDirs) -> None:
        """Start the simulated daemon and wait until its ``control`` FIFO exists (it is serving).

        Raises:
            MpsUnavailable: it could not be spawned, or ended before serving.
        """
        # The agent owns the daemon and hands its FIFO and folders to the user: the user may not be
        # able to run the agent's interpreter at all (root's venv under /root or a pyenv).
        user, _group, _extra = _as_user(uid, gid)
        owner = [f"{uid}:{gid}"] if user is not None else []
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "labgang.agent.mps_sim", dirs.pipe, dirs.log, *owner],
                env=self._environment(card, dirs),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            raise MpsUnavailable(f"simulated MPS control for card {card}: {exc}") from None
        assert proc.stdout is not None
        ready = proc.stdout.readline()  # "serving" once its FIFO exists; b"" if it ended first
        proc.stdout.close()
        if ready.strip() != b"serving":
            proc.kill()
            proc.wait()
            raise MpsUnavailable(f"simulated MPS control for card {card} ended before serving")
        self._procs[(card, uid)] = proc

    def _environment(self, card: str, dirs: MpsDirs) -> dict[str, str]:
        env = {**daemon_environment(card, dirs), "SIM_MPS_ROLE": "server", "SIM_GPU_MEMORY_MIB": "0"}
        if self._scope:
            env["LABGANG_SIM_SCOPE"] = self._scope
        return env

    def stop(self, card: str, uid: int, gid: int, dirs: MpsDirs) -> None:
        """Write ``quit`` to its FIFO, reap it (SIGKILL past :data:`STOP_TIMEOUT_S`)."""
        proc = self._procs.pop((card, uid), None)
        try:
            fd = os.open(Path(dirs.pipe) / "control", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            fd = None
        if fd is not None:
            try:
                os.write(fd, b"quit\n")
            finally:
                os.close(fd)
        if proc is None:
            return
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def daemons(self) -> dict[tuple[str, int], int]:
        """(card, uid) → pid of each simulated daemon running."""
        return {key: p.pid for key, p in self._procs.items() if p.poll() is None}

    def pids(self) -> set[int]:
        """The pids of the simulated daemons running (each is its card's MPS server too)."""
        return set(self.daemons().values())

    def daemon_of(self, pid: int) -> tuple[str, int] | None:
        """(card UUID, uid) of the simulated daemon ``pid``; None for any other process."""
        return next((key for key, found in self.daemons().items() if found == pid), None)


def open_mps_control(setting: str, *, simulated: bool, scope: str | None = None) -> MpsControl | None:
    """The MPS control for the agent's ``mps`` setting (see the module docstring); None = no MPS here.

    Args:
        simulated: the agent reads a simulated NVML. scope: its simulation scope (simulated daemons carry it).

    Raises:
        ValueError: ``setting`` is not one of :data:`MPS_SETTINGS`, or ``nvidia`` without the
            program on PATH (naming it).
    """
    if setting not in MPS_SETTINGS:
        raise ValueError(f"mps: {setting!r} is not a setting (allowed: {', '.join(MPS_SETTINGS)})")
    if setting == "off":
        return None
    if setting == "simulated" or (setting == "auto" and simulated):
        return SimulatedMpsControl(scope)
    program = shutil.which(CONTROL_PROGRAM)
    if program is None:
        if setting == "nvidia":
            raise ValueError(f"mps: nvidia, but {CONTROL_PROGRAM} is not on the agent's PATH")
        return None
    return NvidiaMpsControl(program)


def _uid(user: str | None) -> int | None:
    try:
        return pwd.getpwnam(user).pw_uid if user else None
    except KeyError:
        return None


def _login(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _job_order(job: str) -> tuple[int, str]:
    return (int(job), "") if job.isdigit() else (1 << 62, job)


@dataclass(slots=True)
class _Daemon:
    card: str
    uid: int
    gid: int
    dirs: MpsDirs
    holders: set[tuple[str, int]]


class MpsDaemons:
    """The control daemons of this node: one per (card, user), alive while that user has an MPS rank on the card.

    Args:
        control: how daemons are started and stopped (:class:`MpsControl`).
        root: the folder holding every daemon's pipe and log folders (:func:`mps_dirs`).
    """

    def __init__(self, control: MpsControl, root: Path) -> None:
        self.control = control
        self.root = Path(root)
        self._daemons: dict[tuple[str, int], _Daemon] = {}
        # pids of this node's MPS processes when a daemon was last stopped: an NVML read taken just
        # before (or a server still exiting) lists them on a card no rank holds any more, which must
        # not read as a foreign process (the scheduler would not offer the card, and a preemptor
        # waiting for that card's rank would lose its room to the victim itself); each is forgotten
        # once an inventory no longer lists it (:meth:`mark_servers`)
        self._stopped: set[int] = set()

    def acquire(self, rank: tuple[str, int], card: str, uid: int, gid: int, *, adopt: bool = False) -> MpsDirs:
        """The folders of ``uid``'s daemon on ``card`` for ``rank`` (job id, rank), starting it
        when ``rank`` is that user's first MPS rank there. Idempotent per rank.

        Args:
            adopt: ``rank`` was re-adopted after an agent restart: a daemon whose ``control``
                is still in its pipe folder (the previous agent's) is kept, not started again.

        Raises:
            MpsUnavailable: the daemon did not start (nothing is left running).
        """
        key = (card, uid)
        daemon = self._daemons.get(key)
        if daemon is None:
            dirs = mps_dirs(self.root, card, uid)
            for folder in (dirs.pipe, dirs.log):
                os.makedirs(folder, mode=0o700, exist_ok=True)
                if os.geteuid() == 0:
                    os.chown(folder, uid, gid)  # only this user's clients reach this server
            if adopt and (Path(dirs.pipe) / "control").exists():
                log.info("MPS control daemon for uid %s on %s kept from the previous agent", uid, card)
            else:
                self.control.start(card, uid, gid, dirs)
                log.info("MPS control daemon for uid %s on %s started (%s)", uid, card, dirs.pipe)
            daemon = self._daemons[key] = _Daemon(card, uid, gid, dirs, set())
        daemon.holders.add(rank)
        return daemon.dirs

    def release(self, rank: tuple[str, int]) -> None:
        """``rank`` is gone: stop each daemon it was the last MPS rank of. Unknown ranks are ignored."""
        for key, daemon in list(self._daemons.items()):
            if rank in daemon.holders:
                daemon.holders.discard(rank)
                if not daemon.holders:
                    self._stopped |= self.control.pids()
                    del self._daemons[key]
                    self.control.stop(daemon.card, daemon.uid, daemon.gid, daemon.dirs)
                    log.info("MPS control daemon for uid %s on %s stopped", daemon.uid, daemon.card)

    def pids(self) -> set[int]:
        """The MPS processes of this node (never foreign on its cards); empty while no daemon runs."""
        return self.control.pids() if self._daemons else set()

    def mark_servers(self, inv: NodeInventory) -> NodeInventory:
        """``inv`` with each of this node's MPS processes on a card marked as labgang's MPS server
        (``ProcessInfo.mps_server``: the login name of the user it serves; ``mps_jobs``: the jobs of
        the MPS ranks it serves there), so views do not list it as a foreign process. ``inv``'s
        processes carry their host facts already (``procfacts.py``: the login name of each)."""
        pids = self.pids() | self._stopped
        if not pids:
            return inv
        listed: set[int] = set()
        gpus = []
        for gpu in inv.gpus:
            procs = gpu.processes
            if isinstance(procs, tuple):
                listed.update(p.pid for p in procs)
                if any(p.pid in pids for p in procs):
                    procs = tuple(self._marked(str(gpu.uuid), p) if p.pid in pids else p for p in procs)
            gpus.append(dataclasses.replace(gpu, processes=procs))
        self._stopped &= listed  # a stopped server no inventory lists any more is gone: its pid may be reused
        return dataclasses.replace(inv, gpus=tuple(gpus))

    def _marked(self, card: str, p: ProcessInfo) -> ProcessInfo:
        uid = _uid(p.user)
        key = self.control.daemon_of(p.pid) or ((card, uid) if uid is not None else None)
        daemon = self._daemons.get(key) if key is not None else None
        served = [d for (c, _), d in self._daemons.items() if c == card]
        if daemon is None and len(served) == 1:
            daemon = served[0]  # the server of the card's one daemon (its uid unknown to the OS)
        if daemon is None:
            return dataclasses.replace(p, mps_server=p.user or "?")  # ours (pids()), whose unknown
        jobs = tuple(sorted({job.rsplit(".", 1)[0] for job, _rank in daemon.holders}, key=_job_order))
        return dataclasses.replace(p, mps_server=_login(daemon.uid), mps_jobs=jobs)

    def running(self) -> dict[str, list[int]]:
        """card UUID → uids whose daemon runs there (``labgang nodes``)."""
        out: dict[str, list[int]] = {}
        for card, uid in sorted(self._daemons):
            out.setdefault(card, []).append(uid)
        return out

    def close(self) -> None:
        """Stop every daemon (the agent is shutting down with no MPS rank left)."""
        for rank in [r for d in list(self._daemons.values()) for r in list(d.holders)]:
            self.release(rank)
