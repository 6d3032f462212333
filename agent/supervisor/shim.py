"""The small parent of one rank ("rank shim"). Standard library only; run as a script.

Why it exists: the agent must survive its own crash without losing its ranks or their
exit statuses. A rank is therefore not the agent's child but the child of this shim,
which the agent spawns in a session of its own (so a signal to the agent's group never
reaches it) with ``python -I -S shim.py RANK_DIR``: isolated mode, no site, the agent's
own minimal environment. Nothing the job submitted (``PYTHONPATH``, ``LD_PRELOAD``…)
reaches this process, which runs with the agent's privileges.

What it does, in order:

1. becomes a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so every descendant
   of the rank that is orphaned (double-forked daemons, ``setsid`` children, data-loader
   workers whose parent died) is re-parented to the shim instead of init. The whole
   process tree of a rank therefore stays below the shim, and the agent finds it by
   walking the shim's descendants, even after an agent restart;
2. opens the rank's log (owned by the rank's user, mode 0600) and starts the rank with
   ``subprocess.Popen(user=, group=, extra_groups=, start_new_session=True)``, stdin from
   ``/dev/null`` (or the ``stdin_path`` file), stdout and stderr into two pipes that the shim copies into the
   log, marking the stderr bytes (:class:`RotatingLog`);
3. writes ``rank.json`` (pid, pgid, /proc start time, start wall time);
4. reaps every child; when the rank's main process ends it writes ``exit.json`` with the
   exit status (the code, or 128+N for signal N);
5. keeps copying output and reaping until the pipe is closed and no descendant is left,
   then exits. The agent counts the rank as "gone" only after that.

The log has a size cap per file. When the next write would pass it, the shim *rotates*:
``rank-R.log`` becomes ``rank-R.log.1`` (replacing an older one) and a new file starts; nothing
is written into the output to say so. Offsets a reader asks for are *logical* (bytes since the
rank's first), and the *generations* file (``rank-R.log.gen``, :class:`RotatingLog`) says where
each file starts, so ``read_log`` reads the rest of ``.1`` before the new file and says how many
bytes a late reader lost (``agent/supervisor/log_generations.py``). At most two files exist per
rank (≤ 2 × cap bytes), except while a follower (``labgang run``) has not read all of ``.1``: then
the rotation waits (the current file grows) until it has, or until it has read nothing for
``HOLD_IDLE_S`` (gone, or stopped): a live ``run`` loses no output.

Inputs (``RANK_DIR/launch.bin``, written by the agent with ``marshal``, a dict of plain
values): ``argv``, ``env``, ``cwd``, ``uid``, ``gid``, ``groups``, ``drop_privileges``,
``log_path``, ``log_max_bytes``, ``log_hold`` (a ``labgang run`` follows the log: :class:`RotatingLog`),
``log_header`` (a line written first, or None), ``cpus``
(CPU numbers to pin the rank to, or None), ``cgroup_procs`` (the ``cgroup.procs`` of the rank's
fenced cgroup, ``agent/confine/cgroup.py``, which the shim joins first; None: not confined),
``lease_path`` (the agent's ``lease.json``, or None), ``grace`` (the job's grace, seconds),
``output_path``/``error_path`` (``--output``/``--error``: absolute file names, or None),
``stdin_path`` (a file the rank reads as its standard input: ``labgang run``'s, for rank 0; None:
``/dev/null``) and ``pty_in`` (``labgang run --pty``: a FIFO of terminal input frames,
:func:`pty_frames`; the rank then runs on a pseudo-terminal whose master the shim holds), and
``stdin_in`` (``labgang run``'s standard input, streamed: a FIFO of input frames the shim copies
into the rank's stdin pipe with backpressure, ``stdinrelay.py``), and ``gate`` (a gang's ranks
launched together, ``gate.py``: the paths of its start gate's ``release`` and ``ready`` FIFOs and
``aborted`` marker, and this rank's number; None: start at once).

Start gate: with ``gate``, the child forked for the rank does everything but the ``exec`` (its
privileges dropped, its ``cwd`` entered, its descriptors in place), reports ``R<rank>`` on the
``ready`` FIFO and blocks reading ``release`` until the agent closes it: then every rank of the
gang on this node ``exec``-s at once. An aborted gate (the marker) ends the child before the
``exec``; the shim writes ``exit.json`` with status 125 and ``not started: <reason>``. A failure
before the gate (the cgroup, the ``cwd``, the fork) is reported as ``F<rank>``, so the agent
aborts the gate for the whole gang instead of waiting.

Output files (Slurm's ``--output``/``--error``): the shim opens them *as the rank's user* (its
effective uid, gid and groups switched for the ``open`` alone, so the user's own permissions
decide; created 0644 and truncated, as ``sbatch`` does) and copies the rank's stdout there, and its
stderr to the error file (to the output file when there is none), besides the log that
``labgang logs`` reads. Stdout and stderr come through two pipes (on a pseudo-terminal they are one
stream, copied to the output file). A file that cannot be opened is
said once in the log and the rank runs anyway.

The lease watchdog (``leasewatch.py``, imported from beside this file): while the rank runs, the
shim looks at the node's lease about once a second; when it ran out and no agent is alive to stop
the rank, the shim stops it (SIGTERM to its group, SIGKILL after the grace) and marks
``exit.json`` ``"fenced": true``.

CPU pinning: before starting the rank the shim calls ``sched_setaffinity`` on itself with
``cpus`` ∩ the CPUs it may use, so the rank inherits the mask (its GPUs' NUMA node CPUs; the
union when its GPUs span sockets). When none of them is usable the rank is not pinned and the
log says so. Either way the rank's ``LABGANG_CPUS`` is the CPU list it may run on.

Spare shims: started as ``shim.py --spare NICE`` (stdin a pipe from the agent), a shim does its
start-up and imports ahead of time and then waits for one line on stdin, the rank folder
it is given; it then takes the agent's priority ``NICE`` back (a root agent lets spares wait at
a low one), sends its own errors to that folder's ``shim.err`` and carries on as
above. End of input before a line (the agent stopped or dropped it) makes it exit at once.
A launch therefore pays for no interpreter start-up (``Supervisor(spare_shims=N)``).

Startup cost matters (it is most of the time to start a gang, see ``bench/spawn.py``), so
the shim imports only what it needs: ``marshal`` instead of ``json`` for its input (``json``
pulls in ``re``), and its two output files are formatted by hand (numbers only; the rare
error message goes through ``json``, imported on that path alone).
"""

from __future__ import annotations

import ctypes
import errno
import marshal
import os
import select
import signal
import subprocess
import sys
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs each launch ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType
    from typing import Any

    from labgang.agent.supervisor.leasewatch import LeaseWatch
    from labgang.agent.supervisor.stdinrelay import StdinPump

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
READ_CHUNK = 65536


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``rename`` (readers see all or nothing)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_exit(rank_dir: str, status: int, error: str | None = None, *, fenced: bool = False) -> None:
    """Write ``exit.json``: the exit status, the wall time now, an error message or null, and
    ``"fenced": true`` when this shim stopped the rank because the node's lease ran out."""
    if error is None:
        error_text = "null"
    else:
        import json  # only on this rare path: json costs ~8 ms of startup

        error_text = json.dumps(error)
    write_atomic(
        os.path.join(rank_dir, "exit.json"),
        f'{{"exit_status": {int(status)}, "ended_at": {time.time()!r}, "error": {error_text}'
        + (', "fenced": true}' if fenced else "}"),
    )


def proc_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (``/proc/PID/stat`` field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return int(raw[raw.rindex(b")") + 2 :].split()[19])


def sibling_module(name: str) -> ModuleType:
    """The module ``name`` (``leasewatch``, ``stdinrelay``) loaded from its file beside this one: the shim
    runs as ``python -I -S shim.py``, outside the package, and leaves ``sys.path`` as it found it.

    Raises:
        ImportError: there is no ``name``.py beside this file.
    """
    import importlib.util

    found = sys.modules.get(name)
    if found is not None:
        return found
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no {name}.py beside the shim", path=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it, as an import would (dataclasses and typing look it up)
    spec.loader.exec_module(module)
    return module


def lease_watch_class() -> type[LeaseWatch]:
    """``leasewatch.LeaseWatch``, loaded from beside this file (:func:`sibling_module`)."""
    found: type[LeaseWatch] = sibling_module("leasewatch").LeaseWatch
    return found


def stdin_pump_class() -> type[StdinPump]:
    """``stdinrelay.StdinPump``, loaded from beside this file (:func:`sibling_module`)."""
    found: type[StdinPump] = sibling_module("stdinrelay").StdinPump
    return found


def become_subreaper() -> None:
    """Make orphaned descendants re-parent to this process (Linux >= 3.4)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")


def utc_now_text() -> str:
    """The current UTC time as ``2026-01-31T12:00:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


STDERR_MARKS_SUFFIX = ".stderr"
"""The rank log's stderr marks file is the log's path plus this (``rank-0.log.stderr``); the same as
``log_streams.STDERR_MARKS_SUFFIX``, which reads it (this file imports no labgang module)."""


GENERATIONS_SUFFIX = ".gen"
"""The rank log's generations file is the log's path plus this (``rank-0.log.gen``): one ASCII line
``SEQ BASE1 BASE``; ``log_generations.py`` reads it (this file imports no labgang module)."""

READER_SUFFIX = ".reader"
"""The first logical offset a follower has still to read (of any stream it follows) is in the log's
path plus this (``rank-0.log.reader``), written by ``read_log`` (``log_generations.READER_SUFFIX``)."""

HOLD_IDLE_S = 30.0
"""A follower that has read nothing for this long no longer holds a rotation back (``labgang run``
reads every 0.2 s while it is attached)."""

HOLD_CHECK_BYTES = 1 << 16
"""While a rotation is held, the follower's position is looked at again after this much more output."""


class RotatingLog:
    """Append-only log file owned by the rank's user, rotated to ``.1`` at ``max_bytes``.

    Both of the rank's streams go into it, as they arrive. Which bytes were stderr is kept beside it,
    in the *marks* file (``PATH.stderr``, rotated with the log): one ASCII line ``START LENGTH`` per
    stderr piece, byte offsets into the log file, written before the piece itself (a reader never
    sees stderr bytes without their mark). ``labgang run`` follows the two streams apart
    (``agent/commands.py`` ``read_log`` with ``stream``)."""

    def __init__(self, path: str, max_bytes: int, uid: int | None, gid: int | None, hold: bool = False) -> None:
        self.path = path
        self.hold = hold  # ``labgang run`` follows: before its first read, it is counted at offset 0
        self.opened_at = time.time()
        self.max_bytes = max(int(max_bytes), 1024)
        self.uid = uid
        self.gid = gid
        self.fd = self._open(path)
        self.size = os.fstat(self.fd).st_size
        self.marks_fd: int | None = None  # opened at the first stderr piece
        # the generations: a sequence number (odd while a rotation is under way), where ``.1`` starts
        # (-1: there is none) and where the current file starts, in logical bytes since the first
        self.seq = 0
        self.base1 = -1
        self.base = 0
        self.next_hold_check = 0  # the file size at which a held rotation is looked at again
        # no generations file until the first rotation (one file less to make on the launch path): its
        # first write, odd, comes before any rename, so a reader that saw none reads again

    def _open(self, path: str) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o600)
        if self.uid is not None:
            os.fchown(fd, self.uid, self.gid if self.gid is not None else -1)
        os.fchmod(fd, 0o600)
        return fd

    def _write_generations(self) -> None:
        write_atomic(self.path + GENERATIONS_SUFFIX, f"{self.seq} {self.base1} {self.base}\n")

    def _held(self) -> bool:
        """True when a follower that read within :data:`HOLD_IDLE_S` has not read all of ``.1`` yet (the
        offset it needs next, in the ``.reader`` file ``read_log`` writes, is before the current file's
        start), so rotating now would discard bytes it has still to read; with ``hold``, also before the
        follower's first read, for :data:`HOLD_IDLE_S` from the start."""
        now = time.time()
        reader = self.path + READER_SUFFIX
        try:
            if now - os.stat(reader).st_mtime > HOLD_IDLE_S:
                return False  # gone, or stopped: the log rotates as any other
            with open(reader, "rb") as fh:
                needed = int(fh.read() or b"0")
        except FileNotFoundError:
            # a ``run``'s follower not heard from yet: it reads from 0 once it comes, unless long in coming
            return self.hold and now - self.opened_at <= HOLD_IDLE_S
        except (OSError, ValueError):
            return False
        return needed < self.base

    def _rotate(self) -> None:
        self.seq += 1  # odd: a reader that sees this retries (a seqlock over the two files' names)
        self._write_generations()
        os.close(self.fd)
        os.replace(self.path, self.path + ".1")
        if self.marks_fd is not None:
            os.close(self.marks_fd)
            self.marks_fd = None
            os.replace(self.path + STDERR_MARKS_SUFFIX, self.path + ".1" + STDERR_MARKS_SUFFIX)
        else:  # no stderr in the file now ``.1``: no marks of an older one may stay beside it
            try:
                os.unlink(self.path + ".1" + STDERR_MARKS_SUFFIX)
            except FileNotFoundError:
                pass
        self.fd = self._open(self.path)
        self.base1, self.base = self.base, self.base + self.size
        self.size = 0
        self.next_hold_check = 0
        self.seq += 1
        self._write_generations()

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        self.size += len(data)

    def write(self, data: bytes, stderr: bool = False) -> None:
        """Append ``data`` (``stderr``: the rank's stderr, marked as such), rotating first whenever the
        file would pass its cap."""
        view = memoryview(data)
        while view:
            room = self.max_bytes - self.size
            if room <= 0:
                if self.size >= self.next_hold_check and not self._held():
                    self._rotate()
                    continue
                if self.size >= self.next_hold_check:  # held: look again after this much more output
                    self.next_hold_check = self.size + HOLD_CHECK_BYTES
                room = len(view)
            part = view[:room]
            if stderr:
                self._mark(len(part))
            self._write_all(bytes(part))
            view = view[len(part) :]

    def _mark(self, length: int) -> None:
        if self.marks_fd is None:
            self.marks_fd = self._open(self.path + STDERR_MARKS_SUFFIX)
        os.write(self.marks_fd, b"%d %d\n" % (self.size, length))  # one short line: one write

    def close(self) -> None:
        os.close(self.fd)
        if self.marks_fd is not None:
            os.close(self.marks_fd)


def open_output_file(path: str, cfg: dict[str, Any]) -> int:
    """Open an ``--output``/``--error`` file for writing as the rank's user (truncated; a new file
    gets ``0666`` less the job's umask, ``cfg["umask"]``, as a file the rank creates itself would).

    With ``drop_privileges`` the shim (root) switches its effective groups, gid and uid for the
    ``open`` alone, so the kernel checks the user's own rights; then switches back. The shim's own
    umask (0o077, for its files) is swapped for the job's for the ``open`` alone as well.

    Raises:
        OSError: the user may not create or write it.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    own_umask = os.umask(rank_umask(cfg))
    try:
        if not cfg["drop_privileges"]:
            return os.open(path, flags, 0o666)
        saved = os.getgroups()
        os.setgroups(list(cfg["groups"]))
        os.setegid(cfg["gid"])
        os.seteuid(cfg["uid"])
        try:
            return os.open(path, flags, 0o666)
        finally:
            os.seteuid(0)
            os.setegid(0)
            os.setgroups(saved)
    finally:
        os.umask(own_umask)


def rank_umask(cfg: dict[str, Any]) -> int:
    """The umask the rank's process and its output files get: the job's (the submitter's, sent in
    the launch spec), or 0o022 for a ``launch.bin`` written before it was."""
    return int(cfg.get("umask", 0o022))


class OutputFiles:
    """The rank's ``--output`` (and ``--error``) files: where each pipe's bytes go besides the log."""

    def __init__(self, cfg: dict[str, Any], log: RotatingLog) -> None:
        self.out_fd: int | None = None
        self.err_fd: int | None = None
        self.failed: set[int] = set()
        for key in ("output_path", "error_path"):
            path = cfg.get(key)
            if not path:
                continue
            try:
                fd = open_output_file(path, cfg)
            except OSError as exc:
                log.write(f"[labgang] cannot write {path}: {exc.strerror or exc}; output only in the log\n".encode())
                continue
            if key == "output_path":
                self.out_fd = fd
            else:
                self.err_fd = fd

    def write(self, fd: int | None, data: bytes) -> None:
        """Append ``data`` to ``fd`` (when open); after a failed write (disk full, quota) the file
        is left alone, said once on the shim's stderr: the log still gets everything."""
        if fd is None or fd in self.failed:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            self.failed.add(fd)
            print(f"labgang shim: output file: {exc}; no more output written there", file=sys.stderr)

    def close(self) -> None:
        for fd in (self.out_fd, self.err_fd):
            if fd is not None:
                os.close(fd)


NOT_RELEASED = 125
"""The exit status of a rank whose start gate was aborted: its command never ran (``gate.py``)."""


class GateClosed(Exception):
    """Raised in the rank's child when its start gate was aborted: the ``exec`` must not happen."""


class RankGate:
    """This rank's side of its gang's start gate (``gate.py`` has the agent's side).

    Opened by the small parent before it forks the rank: the ``release`` FIFO (read; inherited by
    the child) and the ``ready`` FIFO (written). The child, with everything but the ``exec`` done,
    reports ``R<rank>`` and blocks on ``release`` until the agent closes it (:meth:`pass_gate`);
    a failure before that is reported as ``F<rank>`` (:meth:`report`). A ``release`` FIFO that is
    gone, or an ``aborted`` marker found after the wake-up, closes the gate for this rank.
    """

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.rank = int(cfg["rank"])
        self.aborted_name = os.path.basename(cfg["aborted"])
        self.release_fd: int | None = None
        self.ready_fd: int | None = None
        self.folder_fd: int | None = None
        try:
            # The gate's folder, held open: the child, already its user, looks the marker up from
            # here, so no folder above it (the state dir may be 0700) has to let the user through.
            self.folder_fd = os.open(os.path.dirname(cfg["aborted"]), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            fd = os.open(cfg["release"], os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.set_blocking(fd, True)
            self.release_fd = fd
        except FileNotFoundError:
            pass  # removed: the gate is closed for good
        try:
            self.ready_fd = os.open(cfg["ready"], os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            pass  # ENXIO: no agent reads it any more (it is gone: its release is the end of file)

    def report(self, kind: bytes) -> None:
        """Tell the agent ``R`` (parked) or ``F`` (failed before the gate) for this rank; never raises."""
        if self.ready_fd is not None:
            try:
                os.write(self.ready_fd, kind + str(self.rank).encode() + b"\n")
            except OSError:
                pass

    def closed_reason(self) -> str | None:
        """None when the gate was released; else why this rank must not start."""
        if self.release_fd is None or self.folder_fd is None:
            return "its start gate is gone"
        try:
            fd = os.open(self.aborted_name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.folder_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:  # fail closed: a marker that cannot be looked at may be there
            return f"its start gate's marker cannot be read: {exc.strerror or exc}"
        try:
            return os.read(fd, 4096).decode(errors="replace") or "its start gate was aborted"
        finally:
            os.close(fd)

    def pass_gate(self) -> None:
        """The child's very last step before ``exec``: report parked, wait for the release.

        Raises:
            GateClosed: the gate was aborted (``Popen`` then raises ``SubprocessError``).
        """
        # Signals wait while the child is parked: a stop during the gate aborts it, and the child
        # must then end by not starting (status NOT_RELEASED), not by a SIGTERM that would look
        # like a rank that ran. The mask is put back before the exec (a rank inherits it): a signal
        # that came meanwhile then arrives, before the exec, as it would have to the rank.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        self.report(b"R")
        while self.release_fd is not None:
            try:
                if not os.read(self.release_fd, 1):
                    break  # end of file: the agent closed its end (released, aborted, or died)
            except InterruptedError:
                continue
        if self.closed_reason() is not None:
            raise GateClosed  # the child exits: signals still blocked stay undelivered
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def close(self) -> None:
        """Close the small parent's copies of both FIFOs (once its child has ``exec``-ed or failed)."""
        for fd in (self.release_fd, self.ready_fd, self.folder_fd):
            if fd is not None:
                os.close(fd)
        self.release_fd = self.ready_fd = self.folder_fd = None


def gated(gate: RankGate, then: Callable[[], None] | None) -> Callable[[], None]:
    """A ``preexec_fn``: ``then`` (the ``cwd`` step, the terminal), then :meth:`RankGate.pass_gate`."""

    def pre() -> None:
        if then is not None:
            then()
        gate.pass_gate()

    return pre


def enter_as_user(cwd: str, failed: Callable[[], None] | None = None) -> Callable[[], None]:
    """The child's last step before ``exec``, run after it dropped to the user: ``chdir(cwd)``.

    A directory the user cannot enter (a symlink into another user's home, a 0700
    component) ends the child with status 126, one that does not exist with 127 (as a
    failed ``exec`` does), after one ``[labgang]`` line in the rank's log (stderr is the
    log by then), and ``failed()`` (a gated rank tells its start gate).
    """

    def enter() -> None:
        try:
            os.chdir(cwd)
        except OSError as exc:
            os.write(2, f"[labgang] cannot enter cwd {cwd} as this user: {exc.strerror}\n".encode(errors="replace"))
            if failed is not None:
                failed()
            os._exit(127 if exc.errno == errno.ENOENT else 126)

    return enter


def cpu_list(cpus: set[int] | list[int]) -> str:
    """``{0, 1, 2, 5}`` → ``"0-2,5"`` (the kernel's cpulist format)."""
    ordered = sorted(cpus)
    parts = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def pin_cpus(wanted: list[int] | None) -> tuple[str, str | None]:
    """Pin this process to ``wanted`` ∩ its allowed CPUs (inherited by children).

    Returns:
        ``(LABGANG_CPUS value, a log line or None)``; not pinned when ``wanted`` is None or
        shares no CPU with the allowed set.
    """
    allowed = os.sched_getaffinity(0)
    if wanted is None:
        return cpu_list(allowed), None
    usable = allowed & set(wanted)
    if not usable:
        note = f"[labgang] not pinned: CPUs {cpu_list(wanted)} of its GPUs' NUMA node are not available here"
        return cpu_list(allowed), note
    os.sched_setaffinity(0, usable)
    return cpu_list(os.sched_getaffinity(0)), None


def exit_status(wait_status: int) -> int:
    """``waitpid`` status → shell exit status (code, or 128+N for signal N)."""
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


# Signals a shell or a job may rely on, which this shim may have inherited as ignored: a
# non-interactive shell ignores SIGINT and SIGQUIT in its background jobs (`labgang up &` in a
# script), `nohup` ignores SIGHUP, and ignored dispositions survive fork and exec down to the rank.
# SIGPIPE is left alone: Python ignores it in every interpreter, and Popen restores it in the child.
RESET_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


def reset_ignored_signals() -> None:
    """Give every signal in :data:`RESET_SIGNALS` that this process ignores its default action, so
    the rank starts as a command typed in a terminal would (``kill -INT`` stops it, its own
    handlers work). The shim is alone in its session, so only a deliberate ``kill`` reaches it."""
    for signum in RESET_SIGNALS:
        if signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)


def main(rank_dir: str) -> int:
    """Run one rank as described by ``rank_dir/launch.bin``; return this shim's own exit code."""
    with open(os.path.join(rank_dir, "launch.bin"), "rb") as fh:
        cfg = marshal.load(fh)  # noqa: S302 - written by our own supervisor into a 0700 rank directory
    os.umask(0o077)  # the shim's own files; the rank gets the job's umask (rank_umask) at its exec
    # the start gate (a gang's ranks launched together, gate.py): opened first, so that every
    # failure below can be told to the agent waiting for this rank to be parked
    gate = RankGate(cfg["gate"]) if cfg.get("gate") else None
    become_subreaper()
    # No signal is ignored here on purpose: ignored dispositions survive exec and the rank would
    # inherit them. The shim has no controlling terminal, so no terminal signal can reach it.
    reset_ignored_signals()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    drop = bool(cfg["drop_privileges"])
    log = RotatingLog(
        cfg["log_path"],
        cfg["log_max_bytes"],
        cfg["uid"] if drop else None,
        cfg["gid"] if drop else None,
        hold=bool(cfg.get("log_hold")),
    )
    if cfg.get("log_header"):  # labgang's line (restart N), marked as stderr: never the job's stdout
        log.write(cfg["log_header"].encode() + b"\n", stderr=True)
    if cfg.get("cgroup_procs"):
        # Into the rank's fenced cgroup before the rank exists, so it and every child are inside.
        # Fail closed: a rank that should be confined and is not does not start.
        try:
            with open(cfg["cgroup_procs"], "w", encoding="ascii") as fh:
                fh.write(str(os.getpid()))
        except OSError as exc:
            message = f"cannot enter the rank's cgroup {cfg['cgroup_procs']}: {exc.strerror or exc}"
            log.write(f"[labgang] {message}\n".encode())
            log.close()
            write_exit(rank_dir, 126, message)
            if gate is not None:
                gate.report(b"F")
            return 0
    try:
        cpus_text, note = pin_cpus(cfg.get("cpus"))
    except OSError as exc:  # a mask the kernel refuses: run unpinned, say so
        cpus_text, note = cpu_list(os.sched_getaffinity(0)), f"[labgang] not pinned: {exc}"
    if note:
        log.write(note.encode() + b"\n")
    env = dict(cfg["env"])
    env["LABGANG_CPUS"] = cpus_text
    # chdir only once the child is the user (preexec_fn runs after setuid): as root it would
    # follow a symlink into a directory the user may not enter (docs/security.md)
    enter = enter_as_user(cfg["cwd"], None if gate is None else lambda: gate.report(b"F")) if drop else None
    cwd = "/" if drop else cfg["cwd"]
    files = OutputFiles(cfg, log)
    pty_in = None
    if cfg.get("pty_in"):
        # ``labgang run --pty``: the rank's stdin, stdout and stderr are a pseudo-terminal whose
        # master this shim holds (output to the log as usual; input from the ``pty_in`` FIFO).
        out_r, out_w = open_terminal()
        if drop:
            os.fchown(out_w, cfg["uid"], -1)
        pty_in = os.open(cfg["pty_in"], os.O_RDWR | os.O_NONBLOCK)
        enter = controlling_tty(enter)
        child_in: Any = out_w  # the terminal's other side
    else:
        out_r, out_w = os.pipe()
        child_in = subprocess.DEVNULL
    pump = None
    if cfg.get("stdin_in"):
        # ``labgang run``'s standard input, streamed: frames from the ``stdin_in`` FIFO into a
        # pipe that is the rank's stdin (stdinrelay.py, beside this file), read as the loop turns
        pump = stdin_pump_class()(cfg["stdin_in"])
        child_in = pump.child_end
    # stderr comes through a pipe of its own, so that the log marks it and an error file gets it (a
    # terminal carries both as one stream)
    err_r, err_w = os.pipe() if pty_in is None else (None, out_w)
    # ``labgang run``'s standard input, for rank 0: a root-owned file in the 0700 rank folder,
    # opened here (as root) and inherited by the rank as its stdin.
    stdin_file = open(cfg["stdin_path"], "rb") if cfg.get("stdin_path") else None  # noqa: SIM115
    if gate is not None:
        enter = gated(gate, enter)  # the child parks here, everything but the exec done
    try:
        proc = subprocess.Popen(
            cfg["argv"],
            stdin=child_in if stdin_file is None else stdin_file,
            stdout=out_w,
            stderr=err_w,
            cwd=cwd,
            env=env,
            start_new_session=True,
            close_fds=True,
            user=cfg["uid"] if drop else None,
            group=cfg["gid"] if drop else None,
            extra_groups=list(cfg["groups"]) if drop else None,
            preexec_fn=enter,
            umask=rank_umask(cfg),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        os.close(out_w)
        os.close(out_r)
        if err_r is not None:
            os.close(err_r)
            os.close(err_w)
        files.close()
        if stdin_file is not None:
            stdin_file.close()
        closed = None if gate is None or isinstance(exc, OSError) else gate.closed_reason()
        if closed is not None:  # the gate was aborted: the command never ran, by design
            status, message = NOT_RELEASED, f"not started: {closed}"
        elif isinstance(exc, OSError):
            status = 127 if exc.errno == errno.ENOENT else 126
            message = f"cannot start {cfg['argv'][0]!r}: {exc.strerror or exc}"
        else:  # an exception in the child's last step (the terminal, the cwd)
            status, message = 126, f"cannot start {cfg['argv'][0]!r}: {exc}"
        if gate is not None:
            gate.report(b"F")
            gate.close()
        log.write(f"[labgang] {message}\n".encode())
        log.close()
        write_exit(rank_dir, status, message)
        return 0
    if gate is not None:
        gate.close()
    os.close(out_w)
    if err_r is not None:
        os.close(err_w)
    if stdin_file is not None:
        stdin_file.close()
    if pump is not None:
        pump.started()
    # each open pipe: where its bytes go besides the log (stderr: the error file, else the output file);
    # stdout first, so that what a rank wrote to both before the shim woke is logged in its usual order
    sinks = {out_r: files.out_fd}
    if err_r is not None:
        sinks[err_r] = files.out_fd if files.err_fd is None else files.err_fd
    ticks = proc_start_ticks(proc.pid)
    watch = (
        lease_watch_class()(cfg["lease_path"], cfg.get("grace", 0.0), proc.pid, hangup=pty_in is not None)
        if cfg.get("lease_path")
        else None
    )
    write_atomic(
        os.path.join(rank_dir, "rank.json"),
        f'{{"pid": {proc.pid}, "pgid": {proc.pid}, "start_ticks": {"null" if ticks is None else ticks}, '
        f'"started_at": {time.time()!r}}}',
    )

    eof = False
    rank_done = False
    frames = b""
    # the pipe whose last piece ended inside a line: read first when both are ready, so that a line a
    # rank writes in pieces (``cat: `` then ``FILE: Permission denied``) is not cut by the other stream
    partial: int | None = None
    while True:
        no_children = False
        while True:
            try:
                pid, wstatus = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                no_children = True
                break
            if pid == 0:
                break
            if pid == proc.pid and not rank_done:
                rank_done = True
                status = exit_status(wstatus)
                proc.returncode = status  # so Popen never waits on this pid itself
                write_exit(rank_dir, status, fenced=watch is not None and watch.fenced)
        if eof and no_children:
            break
        wait = 1.0
        if watch is not None:
            try:
                watch.poll()
                wait = watch.wait_s()
            except Exception as exc:  # the watchdog must never cost the rank its parent
                print(f"labgang shim: lease watchdog: {exc!r}", file=sys.stderr)
        fds = [wake_r, *sinks]
        if pty_in is not None and out_r in sinks:
            fds.append(pty_in)
        if pump is not None:
            fds += pump.read_fds()
        ready, writable, _ = select.select(fds, [] if pump is None else pump.write_fds(), [], wait)
        if pump is not None:
            pump.step(ready, writable)
        if pty_in is not None and pty_in in ready:
            frames = pty_frames(frames, os.read(pty_in, READ_CHUNK), out_r)
        for fd in sorted((fd for fd in sinks if fd in ready), key=lambda fd: fd != partial):
            try:
                data = os.read(fd, READ_CHUNK)
            except OSError:  # a pseudo-terminal's master reads EIO once no process holds the other side
                data = b""
            if data:
                try:
                    log.write(data, stderr=fd == err_r)
                except OSError as exc:  # disk full, quota: lose output, never the rank or its status
                    print(f"labgang shim: dropped {len(data)} bytes of output: {exc}", file=sys.stderr)
                files.write(sinks[fd], data)
                partial = None if data.endswith(b"\n") else fd
            else:
                del sinks[fd]
                os.close(fd)
        eof = not sinks
        if wake_r in ready:
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
    log.close()
    files.close()
    return 0


def controlling_tty(then: Callable[[], None] | None) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child's stdin (the pseudo-terminal, in the session of its
    own that ``start_new_session`` made) its controlling terminal, then runs ``then``: job control,
    Ctrl-C as SIGINT and SIGWINCH work as on a login terminal."""
    import fcntl
    import termios

    def pre() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        if then is not None:
            then()

    return pre


DEFAULT_TERMINAL_SIZE = (24, 80)
"""(rows, cols) of a ``--pty`` rank's terminal until the caller's size arrives (never 0x0)."""


def open_terminal() -> tuple[int, int]:
    """A pseudo-terminal (master, slave) of :data:`DEFAULT_TERMINAL_SIZE`: ``labgang run --pty``
    sends the caller's real size (a ``W`` frame) as soon as the rank runs."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    rows, cols = DEFAULT_TERMINAL_SIZE
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return master, slave


def pty_frames(pending: bytes, data: bytes, master: int) -> bytes:
    """Apply the complete frames of ``pending + data`` (from the ``pty_in`` FIFO, written by the
    agent) to the pseudo-terminal ``master``; return what is left of an incomplete frame.

    A frame is one type byte, a 2-byte big-endian length and that many bytes: ``D`` input for
    the terminal, ``W`` its new size as ASCII ``"ROWS COLS"`` (``TIOCSWINSZ``: the rank gets SIGWINCH).
    """
    buf = pending + data
    while len(buf) >= 3:
        size = int.from_bytes(buf[1:3], "big")
        if len(buf) < 3 + size:
            break
        kind, body, buf = buf[:1], buf[3 : 3 + size], buf[3 + size :]
        try:
            if kind == b"D":
                os.write(master, body)
            elif kind == b"W":
                import fcntl
                import struct
                import termios

                rows, cols = (int(x) for x in body.split())
                fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        except (OSError, ValueError) as exc:  # a closed terminal, a bad size: never the rank's parent
            print(f"labgang shim: terminal input dropped: {exc}", file=sys.stderr)
    return buf


def wait_for_rank_dir() -> str | None:
    """A spare shim's wait: one line on stdin names the rank folder; None at end of input.

    From then on the shim's own errors go to the rank's ``shim.err`` and stdin is ``/dev/null``.
    """
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(0, 4096)
        if not chunk:
            return None
        data += chunk
    rank_dir = data.decode().strip()
    if not rank_dir:
        return None
    err = os.open(os.path.join(rank_dir, "shim.err"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(err, 2)
    os.close(err)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return rank_dir


def take_priority(nice: int) -> None:
    """Set this spare's own niceness to ``nice`` (the agent's), before anything of its rank starts.

    A spare waits at a low priority (``hostos.SPARE_NICE``); the agent hands out a gang's rank folders
    first and puts their priorities back after (``SpareShims.start_shims``), so a spare that runs
    before that must not fork its rank at the spare's priority, which the rank would inherit. Only a
    root agent lowers a spare's priority, so the spare (root too) may raise it back; a failure is said
    on stderr (the rank's ``shim.err``) and the rank starts all the same.
    """
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) != nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError as exc:
        print(f"labgang shim: priority not put back to {nice}: {exc}", file=sys.stderr)


def exit_now(code: int) -> None:
    """Exit without the interpreter's teardown (module cleanup, GC: several ms of CPU).

    Everything the shim writes is already on disk (``write_atomic``, the log's unbuffered
    ``os.write``); only ``sys.stderr`` may hold a message, so it is flushed first. The
    agent counts a rank's devices busy until this process is gone, so its exit is on the
    path from a rank's end to the next gang's start.
    """
    try:
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[1] == "--spare":
        lease_watch_class()  # imported ahead, as the rest
        given = wait_for_rank_dir()
        if given is not None and len(sys.argv) > 2:
            take_priority(int(sys.argv[2]))
        exit_now(0 if given is None else main(given))
    exit_now(main(sys.argv[1]))
