"""The node agent: NVML inventory + rank supervisor + the link to the coordinator.

One :class:`AgentService` per node. It re-adopts ranks a previous agent left running
(``Supervisor.recover``), reads the inventory every ``sample_s`` (reported every
``interval_s`` and at once on change), ticks the supervisor and reports rank events at
once (kept until the coordinator acknowledges them, so no exit is lost across a
reconnect), executes commands (``agent/commands.py``: launch, stop_job, signal_job,
pick_port, read_log), and serves the user API on the node's Unix socket
(``agent/userproxy.py``: each request forwarded over the link with the caller's uid from
SO_PEERCRED, which the coordinator trusts). The link keeps the node's lease renewed; when
the coordinator has not answered for most of ``node_timeout_s``, the tick stops every rank
here (``agent/fence.py``, ``agent/lease.py``, docs/queue-semantics.md §A5).

The tick is event-driven: it runs when a rank's small parent or main process exits (a
pidfd per process, :class:`~labgang.agent.supervisor.ExitWatcher`), when a grace period
or warning ends (``Supervisor.next_deadline``), after every command, and otherwise every
``TICK_S`` (``STARTING_POLL_S`` while a rank is starting, to see its pid). When a rank has
no process left, NVML is read at that moment (``Supervisor.awaiting_devices``) rather than
at the next periodic read; the fresh inventory travels in the same message as the rank's
``gone`` event, so the coordinator never sees the device free but still showing its pids.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from labgang.agent import labgang_version, paths, sdnotify
from labgang.agent.commands import CommandHandler
from labgang.agent.config import AgentConfig
from labgang.agent.confine import Confinement, HostLimits, RankCgroups
from labgang.agent.confine.devmem import GpuMemLimits
from labgang.agent.exit_stop import ExitStop
from labgang.agent.fence import NodeFence
from labgang.agent.hostres import HostCapacity
from labgang.agent.inventory import NodeInventory, read_inventory
from labgang.agent.link import CoordinatorLink
from labgang.agent.mps import MpsDaemons
from labgang.agent.nvml.backend import NvmlBackend
from labgang.agent.procfacts import ProcessFacts
from labgang.agent.sharers import with_sharers
from labgang.agent.supervisor import DeviceReading, ExitWatcher, Supervisor
from labgang.agent.supervisor.budgets import find_over_budget
from labgang.agent.supervisor.config import SupervisorConfig
from labgang.agent.supervisor.states import RankState
from labgang.agent.supervisor.violations import find_violations
from labgang.agent.supervisor.writer import ThreadWriter
from labgang.agent.token import read_token
from labgang.agent.userproxy import UserSocketProxy

log = logging.getLogger("labgang.agent")

TICK_S = 0.1  # the tick's fallback poll (exits and deadlines wake it at once)
STARTING_POLL_S = 0.02  # poll while a rank is starting: its pid appears in rank.json
RECHECK_MIN_S = 0.02  # first re-read of NVML while a released rank's pids still show; doubles to sample_s
UNKNOWN_GRACE_S = 30.0  # grace assumed for ranks re-adopted from a previous agent


def simulation_scope(state_dir: Path) -> str:
    """The simulated-NVML scope of an agent using ``state_dir``: its resolved path.

    Unique per instance on a host (one agent per state dir) and the same across restarts,
    so a restarted agent re-adopts its own ranks rather than seeing them as foreign.
    """
    return str(Path(state_dir).expanduser().resolve())


class AgentService:
    """One node's agent.

    Args:
        config: the agent configuration.
        backend: an NVML backend (default: ``open_backend(config.simulate)`` at start).
        token: the cluster token (default: read ``config.token_file``; :meth:`set_coordinator`
            sets it for an in-process agent).
        stop_jobs_on_exit: stop every rank (with its grace) when the agent stops; False
            leaves ranks running for the next agent to re-adopt (the default for a service:
            restarting or upgrading the agent must not take jobs down).
        coordinator_stops_too: the coordinator stops with this agent (``labgang up``): ranks left
            running at exit are then not fenced when the lease runs out (``NodeFence.suspend``);
            a service's agent keeps the lease, since its coordinator may start the jobs elsewhere.

    Raises:
        AgentConfigError: (at start) the token file is missing or readable by others.
        NvmlUnavailable: (at start) no NVIDIA driver and no ``simulate`` file.
    """

    def __init__(
        self,
        config: AgentConfig,
        *,
        backend: NvmlBackend | None = None,
        token: str | None = None,
        stop_jobs_on_exit: bool = False,
        coordinator_stops_too: bool = False,
    ) -> None:
        self.config = config
        self.node = config.node
        self.url = config.coordinator
        self.token = token
        self.stop_jobs_on_exit = stop_jobs_on_exit
        self.coordinator_stops_too = coordinator_stops_too
        self.exit_stop = ExitStop()  # what `labgang up` says and does while ranks stop at exit
        self.backend = backend
        self.state_dir = config.resolved_state_dir()
        self.inventory: NodeInventory | None = None
        self.host = HostCapacity.read(config)  # CPUs and memory offered to jobs, in every inventory
        self.supervisor: Supervisor | None = None
        self.link: CoordinatorLink | None = None
        self.fence = NodeFence(self._agent_dir())  # the lease the link renews; the tick fences on it
        self._outbox: list[tuple[int, dict[str, Any]]] = []
        self._seq = 0
        # True while a tick runs: its events leave sup.tick() before they are journalled and queued
        # in the outbox, so "every rank gone and the outbox empty" is only final between ticks.
        self._ticking = False
        self.commands: CommandHandler | None = None  # made once the supervisor exists
        self._proxy: UserSocketProxy | None = None
        self._reading: DeviceReading | None = None  # newest NVML device pids, with the read's start time
        self.facts = ProcessFacts()  # user, command, CPU %, RSS, job and rank of each device process
        self._recheck_s = RECHECK_MIN_S
        self._tick_wake: asyncio.Event | None = None
        self._inv_sent_key: Any = None  # what the coordinator was last sent (devices, pids) and when
        self._inv_sent_at = 0.0
        self.confinement: Confinement | None = None  # how ranks are fenced (decided at start)
        self.host_limits: HostLimits | None = None  # whether ranks' CPUs/memory are enforced (decided at start)
        self.mps: MpsDaemons | None = None  # the MPS control daemons of MPS ranks (agent/mps.py), or None
        self.sharing: dict[str, Any] | None = None  # {"mps", "gpu_mem"}: how this node serves shares (hello)

    def set_coordinator(self, url: str, token: str) -> None:
        """Point the agent at a coordinator (used by ``labgang up`` before :meth:`run`)."""
        self.url = url.rstrip("/")
        self.token = token

    # ----- startup -------------------------------------------------------------------------

    def _open(self) -> None:
        backend = self.backend
        if backend is None:
            from labgang.agent.nvml import open_backend

            scope = simulation_scope(self.state_dir) if self.config.simulate else None
            backend = self.backend = open_backend(self.config.simulate, scope=scope)
        if self.token is None:
            if not self.config.token_file:
                from labgang.agent.config import AgentConfigError

                raise AgentConfigError("token_file: the agent needs the cluster token file to join a coordinator")
            self.token = read_token(self.config.token_file)
        read_at = time.monotonic()
        first = self.host.fill(read_inventory(backend, hostname=self.node))
        self._take_reading(read_at, first)
        sup_cfg = self.config.supervisor_config()
        cgroups = self._decide_confinement(backend, first, sup_cfg)
        # One spare small parent per device at most: no more ranks than devices start at once.
        spares = min(sup_cfg.spare_shims, len(first.allocatable()))
        # A simulated backend with a scope: tag our ranks with it so that other simulated
        # instances on this host (same machine file, same UUIDs) do not count them as foreign.
        scope = getattr(backend, "labgang_sim_scope", None)
        extra_env = None
        if scope:
            from labgang.agent.nvml.simulated import SCOPE_VARIABLE

            extra_env = {SCOPE_VARIABLE: scope}
        self.mps = self._open_mps(backend, first, cgroups)
        self.supervisor = Supervisor.from_config(
            paths.agent_state_dir(self.state_dir),
            sup_cfg,
            device_pids=self._device_pids,
            spare_shims=spares,
            extra_env=extra_env,
            cgroups=cgroups,
            lease_file=self.fence.lease_file,
            journal_writer=ThreadWriter(),  # journal writes off the event loop, in order (writer.py)
            mps=self.mps,
        )
        # The lease the previous agent held: ranks re-adopted below are stopped when it runs out,
        # even if this agent never reaches the coordinator.
        self.fence.load()
        events = self.supervisor.recover()
        self.supervisor.flush_journal()  # on disk before these events are reported (a worker thread here)
        self.fence.adopt(self.supervisor.ranks())  # fenced by their small parents while no agent ran
        for event in events:
            self._queue_event(event.to_dict())

    def _open_mps(
        self, backend: NvmlBackend, first: NodeInventory, cgroups: RankCgroups | None = None
    ) -> MpsDaemons | None:
        """The node's MPS control daemons for the ``mps`` setting (``agent/mps.py``), said once; None = no
        MPS. Also decides how shard ranks' budgets are held (``confine/devmem.py``, :meth:`_decide_gpu_mem`):
        :attr:`sharing`.

        Raises:
            AgentConfigError: ``mps = "nvidia"`` without ``nvidia-cuda-mps-control`` on PATH.
        """
        from labgang.agent.mps import open_mps_control
        from labgang.agent.nvml.simulated import SimulatedNvml

        simulated = bool(self.config.simulate) or isinstance(backend, SimulatedNvml)
        try:
            scope = getattr(backend, "labgang_sim_scope", None)
            control = open_mps_control(self.config.mps, simulated=simulated, scope=scope)
        except ValueError as exc:
            from labgang.agent.config import AgentConfigError

            raise AgentConfigError(str(exc)) from None
        gpu_mem = self._decide_gpu_mem(simulated, first, cgroups)
        self.sharing = {"mps": control.name if control is not None else None, "gpu_mem": gpu_mem.to_dict()}
        if control is None:
            log.info("MPS: off (mps = %s); MPS ranks are refused on this node", self.config.mps)
            return None
        root = Path(self.config.mps_dir) if self.config.mps_dir else self.state_dir / "mps"
        log.info("MPS: %s control daemons, one per card and user, under %s", control.name, root)
        return MpsDaemons(control, root)

    def _decide_gpu_mem(self, simulated: bool, first: NodeInventory, cgroups: RankCgroups | None) -> GpuMemLimits:
        """Decide whether shard ranks' ``--gpu-mem`` budgets are held by the card (``confine/devmem.py``),
        say it once, and where they are, give ``cgroups`` the ``dmem.max`` writer; a write that fails later
        turns :attr:`sharing` to watched with its reason (sent with the next inventory)."""
        from labgang.agent.confine import setup_gpu_mem
        from labgang.agent.confine.devmem import DmemWriter

        cards = {str(g.uuid): g.pci_bus_id if isinstance(g.pci_bus_id, str) else None for g in first.gpus}
        why_none = None
        if cgroups is None:
            confined = self.confinement.reason if self.confinement is not None else "not decided"
            limited = self.host_limits.reason if self.host_limits is not None else "not decided"
            why_none = f"not confined: {confined}; host limits: {limited}"
        gpu_mem = setup_gpu_mem(
            simulated=simulated,
            cards=cards,
            ranks_dir=cgroups.ranks_dir if cgroups is not None else None,
            no_cgroup_reason=why_none,
        )
        log.info("--gpu-mem budgets of shard ranks: %s (%s)", gpu_mem.mode, gpu_mem.reason)
        if gpu_mem.mode == "enforced" and cgroups is not None:
            cgroups.dmem = DmemWriter(gpu_mem.regions, on_fallback=self.note_gpu_mem_fallback)
        return gpu_mem

    def note_gpu_mem_fallback(self, limits: GpuMemLimits) -> None:
        """A ``dmem.max`` write failed: the node's facts say budgets are watched now, and why."""
        if self.sharing is not None:
            self.sharing = {**self.sharing, "gpu_mem": limits.to_dict()}

    def _decide_confinement(
        self, backend: NvmlBackend, first: NodeInventory, cfg: SupervisorConfig
    ) -> RankCgroups | None:
        """Decide how ranks are fenced (``agent/confine/``), say it once, and return the cgroup writer or None.

        Raises:
            AgentConfigError: ``confine = "required"`` and this host cannot confine ranks.
        """
        from labgang.agent.confine import setup_confinement
        from labgang.agent.nvml.minors import gpu_minor_numbers
        from labgang.agent.nvml.recorder import ReplayNvml
        from labgang.agent.nvml.simulated import SimulatedNvml

        simulated = bool(self.config.simulate) or isinstance(backend, (SimulatedNvml, ReplayNvml))
        minors = {} if simulated or cfg.confine == "off" else gpu_minor_numbers(backend)
        confinement, cgroups = setup_confinement(
            cfg.confine, simulated=simulated, cgroup_root=cfg.cgroup_root, inventory=first, gpu_minors=minors
        )
        self.confinement = confinement
        if confinement.confined:
            log.info("ranks confined to their devices: %s", confinement.reason)
        elif cfg.confine == "required":
            from labgang.agent.config import AgentConfigError

            raise AgentConfigError(f"confine: required, but ranks cannot be confined here: {confinement.reason}")
        else:
            # Simulated GPUs have no device nodes: nothing is left unfenced, so no warning there.
            log.log(
                logging.INFO if simulated else logging.WARNING,
                "ranks NOT confined to their devices (%s); device violations are detected through NVML instead",
                confinement.reason,
            )
        return self._decide_host_limits(cfg, simulated, confinement, cgroups)

    def _decide_host_limits(
        self, cfg: SupervisorConfig, simulated: bool, confinement: Confinement, cgroups: RankCgroups | None
    ) -> RankCgroups | None:
        """Decide whether ranks' host CPUs and memory are enforced (``agent/confine/hostlimits.py``); say it once.

        Where ranks are confined to their devices, their device-fenced cgroups get the limits
        too (``cgroups`` is told to write them); where they are not but the host allows limits,
        each rank gets a cgroup of its own for its limits alone. Returns the rank cgroup writer."""
        from labgang.agent.confine import RankCgroups, setup_host_limits

        limits = setup_host_limits(cfg.confine, simulated=simulated, cgroup_root=cfg.cgroup_root)
        if limits.enforced and cgroups is None and limits.ranks_dir is not None:
            cgroups = RankCgroups(limits.ranks_dir, None, enforce_limits=True)  # limits only, no device filter
            limits = replace(
                limits, reason=f"{limits.reason} (ranks not confined to their devices: {confinement.reason})"
            )
        elif limits.enforced and cgroups is not None:
            cgroups.enforce_limits = True
        self.host_limits = limits
        quiet = self.host_limits.enforced or simulated or cfg.confine == "off"
        log.log(logging.INFO if quiet else logging.WARNING, "%s", self.host_limits.message())
        return cgroups

    def violations(self, inv: NodeInventory) -> list[dict[str, Any]]:
        """The rank processes ``inv`` shows on devices their rank was not given (``violations.py``),
        then the sharing ranks over their device-memory budget (``budgets.py``, ``kind = "gpu-mem"``)."""
        if self.supervisor is None:
            return []
        parents = {m.uuid: str(g.uuid) for g in inv.gpus for m in g.mig_devices if isinstance(m.uuid, str)}
        processes = self.supervisor.rank_processes()
        found = [v.to_dict() for v in find_violations(inv.device_pids(), processes, parents)]
        budgets = self.supervisor.memory_budgets()
        if budgets:
            found += [v.to_dict() for v in find_over_budget(inv.device_memory(), processes, budgets)]
        return found

    def _device_pids(self) -> DeviceReading | None:
        """The supervisor's device check: the newest reading with its start time (None before the first)."""
        return self._reading

    def _take_reading(self, read_at: float, inv: NodeInventory) -> None:
        """Keep ``inv`` (an NVML read begun at monotonic ``read_at``) unless a newer read is kept already."""
        if self._reading is None or read_at >= self._reading.read_at:
            self.inventory = inv
            self._reading = DeviceReading(pids=inv.device_pids(), read_at=read_at)

    async def _read_inventory(self) -> NodeInventory:
        """Read NVML now (on a worker thread) and keep the result; return it."""
        loop = asyncio.get_running_loop()
        read_at = time.monotonic()
        backend = self.backend
        assert backend is not None  # opened by run() before any read
        inv = self.host.fill(await loop.run_in_executor(None, lambda: read_inventory(backend, hostname=self.node)))
        self._take_reading(read_at, inv)
        return inv

    def hello(self) -> dict[str, Any]:
        """The first message of every connection: who we are, what we have, what we run."""
        assert self.inventory is not None and self.supervisor is not None
        return {
            "type": "hello",
            "node": self.node,
            "version": labgang_version(),
            "address": self.config.address or self.node,
            "inventory": self.annotated(self.inventory).to_dict(),
            "ranks": self.rank_dicts(),
            "policy": self.run_as_policy(),
            "confinement": self.confinement.to_dict() if self.confinement is not None else None,
            "host_limits": self.host_limits.to_dict() if self.host_limits is not None else None,
            "sharing": self.sharing,
            "violations": self.violations(self.inventory),
        }

    def annotated(self, inv: NodeInventory) -> NodeInventory:
        """``inv`` with its processes' host facts (``procfacts.py``) and each GPU's sharers (``sharers.py``)."""
        assert self.supervisor is not None
        owned = self.facts.annotate(inv, self.rank_owners())
        if self.mps is not None:
            owned = self.mps.mark_servers(owned)  # labgang's own MPS servers: no one's foreign process
        grants = self.supervisor.share_grants()
        return with_sharers(owned, grants, self.supervisor.rank_processes()) if grants else owned

    def _agent_dir(self) -> Path:
        """Where the supervisor journal and the lease file live."""
        return paths.agent_state_dir(self.state_dir)

    def rank_owners(self) -> dict[int, tuple[str, int]]:
        """pid → (job id as people see it, rank) for every live process of a supervised rank.

        The supervisor knows an attempt by its run id, ``"<job id>.<attempt>"`` (the coordinator's
        ``run_id``; job ids have no dot), the process view shows the job id."""
        assert self.supervisor is not None
        return {pid: (job.rsplit(".", 1)[0], rank) for pid, (job, rank, _) in self.supervisor.rank_processes().items()}

    def rank_dicts(self) -> list[dict[str, Any]]:
        """Every supervised rank's ``RankStatus`` dict, with ``fenced: true`` on a rank this agent
        stopped because the node's lease ran out (so the coordinator requeues its job, not fails it)."""
        assert self.supervisor is not None
        return [self.fence.mark(s.to_dict()) for s in self.supervisor.ranks()]

    def run_as_policy(self) -> dict[str, Any]:
        """Whose ranks this agent may start, so the coordinator can refuse at submission a job
        no agent would ever run: ``{"agent_uid", "allow_root", "allowed_uids" (list or None)}``.

        A root agent starts any non-root user (only ``allowed_uids`` when set) and root only
        with ``allow_root``; an agent running as a user starts only that user's ranks
        (``labgang.agent.supervisor.identity.resolve_run_as``).
        """
        cfg = self.config.supervisor_config()
        return {
            "agent_uid": os.geteuid(),
            "allow_root": cfg.allow_root,
            "allowed_uids": None if cfg.allowed_uids is None else sorted(cfg.allowed_uids),
        }

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set (or SIGINT/SIGTERM when run by :func:`main_async`).

        Raises:
            AgentConfigError, NvmlUnavailable: see the class docstring.
        """
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._open)
        assert self.token is not None
        assert self.supervisor is not None  # made by _open
        self.commands = CommandHandler(self.supervisor, self._wake_tick)
        self.link = CoordinatorLink(
            self.url,
            self.token,
            hello=self.hello,
            on_command=self.commands.handle,
            on_connected=self._flush_outbox,
            on_ack=self._on_ack,
            reconnect_max_s=self.config.reconnect_max_s,
            lease=self.fence.lease,
        )
        if self.config.user_socket:
            proxy = UserSocketProxy(self.state_dir, self.node, self.link.forward)
            if await proxy.start():
                self._proxy = proxy
        # Ranks re-adopted and the node socket served: ready (the link comes up on its own).
        sdnotify.ready(f"node {self.node}, {len(self.supervisor.ranks())} rank(s) supervised")
        # The loops get their own stop so that, when ranks are stopped at exit, their exits
        # still reach the coordinator before the link closes.
        loops_stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self.link.run(loops_stop), name="agent-link"),
            asyncio.create_task(self._tick_loop(loops_stop), name="agent-tick"),
            asyncio.create_task(self._inventory_loop(loops_stop), name="agent-inventory"),
        ]
        try:
            await stop.wait()
            sdnotify.stopping()
            if self.stop_jobs_on_exit:
                await self._stop_all_ranks()
        finally:
            loops_stop.set()
            for task in tasks[1:]:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._proxy is not None:
                await self._proxy.close()
            if self.supervisor is not None:
                await asyncio.to_thread(self.supervisor.flush_journal)
                if self.coordinator_stops_too and not self.stop_jobs_on_exit:
                    self.fence.suspend("labgang up stopped with --keep-jobs")
            shutdown = getattr(self.backend, "nvmlShutdown", None)
            if shutdown is not None:
                try:
                    shutdown()
                except Exception:  # NVML shutdown errors at exit change nothing
                    log.debug("nvmlShutdown failed", exc_info=True)

    def live_runs(self) -> set[str]:
        """The runs (``"<job id>.<attempt>"``) with a rank not yet gone; empty before the supervisor exists."""
        sup = self.supervisor
        return set() if sup is None else {s.job_id for s in sup.ranks() if s.state is not RankState.GONE}

    async def _stop_all_ranks(self, *, extra_s: float = 10.0, report_s: float = 10.0) -> None:
        """Stop every rank with its grace, wait until all are gone (the tick loop advances them) and
        the tick that saw them go has queued its events, then give the link up to ``report_s`` seconds
        to have them acknowledged (it ends at the acknowledgement; the bound is for a coordinator
        that does not answer)."""
        sup = self.supervisor
        if sup is None:
            return
        loop = asyncio.get_running_loop()
        live = [s for s in sup.ranks() if s.state is not RankState.GONE]
        jobs = sorted({s.job_id for s in live})
        for job_id in jobs:
            sup.stop_job(job_id, warn=False)  # shutting down: SIGTERM now, no --signal wait
        self._wake_tick()
        launched = self.commands.grace if self.commands is not None else {}
        grace = max((launched.get(s.job_id, UNKNOWN_GRACE_S) for s in live), default=0.0)
        self.exit_stop.started(len(jobs), grace)
        deadline = loop.time() + grace + extra_s
        while self._ticking or any(s.state is not RankState.GONE for s in sup.ranks()):
            if self.exit_stop.due:  # a second interrupt: SIGKILL at the next tick, not after the grace
                self.exit_stop.kill(sup, sorted({s.job_id for s in sup.ranks() if s.state is not RankState.GONE}))
                self._wake_tick()
            if loop.time() > deadline:
                log.warning("ranks still not gone %g s after their grace at agent exit", extra_s)
                break
            await asyncio.sleep(TICK_S)
        deadline = loop.time() + report_s
        while self._outbox and self.link is not None and self.link.is_up and loop.time() < deadline:
            await asyncio.sleep(TICK_S)

    # ----- loops ---------------------------------------------------------------------------

    def _wake_tick(self) -> None:
        """Ask the tick loop for a tick now (a watched process exited, a command changed something)."""
        if self._tick_wake is not None:
            self._tick_wake.set()

    async def _tick_loop(self, stop: asyncio.Event) -> None:
        assert self.supervisor is not None and self.link is not None
        loop = asyncio.get_running_loop()
        self._tick_wake = wake = asyncio.Event()
        watcher = ExitWatcher(loop, self._wake_tick)
        try:
            while not stop.is_set():
                wake.clear()
                try:
                    await self._tick_once()
                    watcher.update(self.supervisor.watched_processes())
                    self._refill_spares()
                except Exception:  # one bad tick must not stop supervision
                    log.exception("supervisor tick failed")
                try:
                    await asyncio.wait_for(wake.wait(), self._next_tick_in())
                except TimeoutError:
                    pass
        finally:
            watcher.close()
            self._tick_wake = None
            self.supervisor.close_spares()

    def _refill_spares(self) -> None:
        """Start the spare small parents a launch used, once no rank is starting (they cost CPU)."""
        sup = self.supervisor
        assert sup is not None
        if sup.spares_missing and not any(s.state is RankState.STARTING for s in sup.ranks()):
            sup.refill_spares()

    async def _tick_once(self) -> None:
        """One tick; when a rank waits only for NVML, read NVML now and tick again."""
        self._ticking = True
        try:
            await self._tick_and_report()
        finally:
            self._ticking = False

    async def _tick_and_report(self) -> None:
        sup = self.supervisor
        assert sup is not None
        self.fence.check(sup)
        events = sup.tick()
        await self._report(events)
        need = sup.awaiting_devices()
        if need is None:
            self._recheck_s = RECHECK_MIN_S
            return
        reading = self._reading
        if reading is not None and reading.read_at >= need and time.monotonic() - reading.read_at < self._recheck_s:
            return  # a fresh read still showed the pids: read again when the backoff ends
        began = time.perf_counter()
        try:
            inv = await self._read_inventory()
        except Exception:  # the rank stays RELEASING; the next tick tries again
            log.exception("inventory read for released ranks failed")
            return
        events = sup.tick()
        log.debug(
            "released ranks: NVML read and tick took %.1f ms; %d event(s)",
            (time.perf_counter() - began) * 1e3,
            len(events),
        )
        if sup.awaiting_devices() is not None:
            self._recheck_s = min(self._recheck_s * 2, self.config.sample_s)
        await self._report(events, inventory=inv)

    def _next_tick_in(self) -> float:
        """Seconds until the next tick is due without a wake-up: a deadline, a re-read, a start, or ``TICK_S``."""
        sup = self.supervisor
        assert sup is not None
        now = time.monotonic()
        delay = TICK_S
        deadline = sup.next_deadline()
        if deadline is not None:
            delay = min(delay, deadline - now)
        expires = self.fence.next_expiry()
        if expires is not None:
            delay = min(delay, expires - now)
        if sup.awaiting_devices() is not None and self._reading is not None:
            delay = min(delay, self._reading.read_at + self._recheck_s - now)
        if any(s.state is RankState.STARTING for s in sup.ranks()):
            delay = min(delay, STARTING_POLL_S)
        return max(delay, 0.0)

    async def _report(self, events: list[Any], *, inventory: NodeInventory | None = None) -> None:
        """Queue ``events`` and send everything unacknowledged at once (with ``inventory`` when given)."""
        if events and self.supervisor is not None:
            log.debug("tick: %s", ", ".join(f"{e.job_id}/{e.rank} {e.kind}" for e in events))
            await asyncio.wrap_future(self.supervisor.journal_written())  # journalled before reported
            if any(e.kind == "exited" for e in events):
                self.fence.adopt(self.supervisor.ranks())  # a small parent may have fenced its rank
            for ev in events:
                self._queue_event(ev.to_dict())
        if events or inventory is not None:
            await self._flush_outbox(inventory=inventory)

    def _queue_event(self, event: dict[str, Any]) -> None:
        self._seq += 1
        self._outbox.append((self._seq, self.fence.mark(event)))

    async def _flush_outbox(self, inventory: NodeInventory | None = None) -> None:
        """Send every event the coordinator has not acknowledged yet (after a reconnect too).

        Args:
            inventory: a fresh inventory to send first, in the same message (the coordinator
                applies it before the events), or as its own ``inventory`` message when no
                event is waiting.
        """
        if self.link is None:
            return
        inv_message, key = self._inventory_message(inventory) if inventory is not None else (None, None)
        if self._outbox:
            message: dict[str, Any] = {
                "type": "rank_events",
                "seq": self._outbox[-1][0],
                "events": [e for _, e in self._outbox],
            }
            if inv_message is not None:
                message["inventory"] = inv_message["inventory"]
                message["violations"] = inv_message["violations"]
                # Its key counts as sent below, so what it says of sharing must travel with it.
                message["sharing"] = inv_message["sharing"]
            sent = await self.link.send(message)
        elif inv_message is not None:
            sent = await self.link.send(inv_message)
        else:
            return
        if sent and key is not None:
            self._inv_sent_key = key
            self._inv_sent_at = time.monotonic()

    def _inventory_message(self, inv: NodeInventory) -> tuple[dict[str, Any], Any]:
        """The ``inventory`` message for ``inv`` (inventory, ranks, device violations) and what it
        is compared by to tell whether it changed since the last one sent."""
        assert self.supervisor is not None
        violations = self.violations(inv)
        message = {
            "type": "inventory",
            "inventory": self.annotated(inv).to_dict(),
            "ranks": self.rank_dicts(),
            "violations": violations,
            "sharing": self.sharing,
        }
        key = (
            repr(self.sharing),  # a node falling back to watching budgets says so (devmem.py)
            inv.allocatable(),
            inv.device_pids(),
            tuple(sorted((v.get("kind", ""), v["job_id"], v["rank"], v["device"], v["pid"]) for v in violations)),
        )
        return message, key

    def _on_ack(self, seq: int) -> None:
        self._outbox = [(s, e) for s, e in self._outbox if s > seq]
        self._forget_finished()

    def _forget_finished(self) -> None:
        """Drop runs whose ranks are all gone and whose events were acknowledged (logs stay)."""
        sup = self.supervisor
        if sup is None:
            return
        pending = {e["job_id"] for _, e in self._outbox}
        by_job: dict[str, list[Any]] = {}
        for s in sup.ranks():
            by_job.setdefault(s.job_id, []).append(s)
        for job_id, ranks in by_job.items():
            if job_id not in pending and all(s.state is RankState.GONE for s in ranks):
                # Journal folders are deleted by the journal's writer thread, after the ranks' last
                # writes: this runs as the coordinator's acknowledgement arrives, when the next
                # gang's launch is due on this loop.
                sup.forget(job_id)
                self.fence.forget(job_id)

    async def _inventory_loop(self, stop: asyncio.Event) -> None:
        assert self.link is not None and self.supervisor is not None
        while not stop.is_set():
            try:
                inv = await self._read_inventory()
            except Exception:  # one failed read must not stop reporting
                log.exception("inventory read failed")
                await asyncio.sleep(self.config.sample_s)
                continue
            message, key = self._inventory_message(inv)
            now = time.monotonic()
            if key != self._inv_sent_key or now - self._inv_sent_at >= self.config.interval_s:
                sent = await self.link.send(message)
                if sent:
                    self._inv_sent_at, self._inv_sent_key = now, key
            if self.supervisor.awaiting_devices() is not None:
                self._wake_tick()  # this read may settle a released rank
            await asyncio.sleep(self.config.sample_s)


async def main_async(config: AgentConfig, *, stop_jobs_on_exit: bool = False) -> None:
    """Run an agent until SIGINT/SIGTERM (signal handlers only set the stop event)."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    service = AgentService(config, stop_jobs_on_exit=stop_jobs_on_exit)
    await service.run(stop)
