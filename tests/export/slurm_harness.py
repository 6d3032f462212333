"""A real Slurm controller with accounting, on loopback under one temporary directory.

munged (own key and socket) and mariadbd (own data directory, 127.0.0.1) once per test
module (:func:`start_database`), then per case slurmdbd (a fresh database) and slurmctld
(:func:`start`), each in the foreground as the current user; each step waits on a real
condition (a socket that answers, a command that succeeds).
Debian packages: slurmctld slurm-client slurmdbd munge mariadb-server.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("unshare", "munged", "mariadb-install-db", "mariadbd", "slurmdbd", "slurmctld", "sacctmgr", "scontrol")
PACKAGES = "slurmctld slurm-client slurmdbd munge mariadb-server"
START_TIMEOUT_S = 60.0
CLUSTER = "labgangtest"


def missing_binaries() -> list[str]:
    """The programs this harness needs that are not on PATH (or in /usr/sbin)."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [b for b in BINARIES if shutil.which(b, path=path) is None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SlurmCluster:
    """The running daemons; ``env`` runs Slurm commands against them."""

    root: Path
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    last_output: str = ""

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (``scontrol``, ``sacctmgr`` …) against this cluster."""
        return subprocess.run(args, env=self.env, capture_output=True, text=True, check=check, timeout=60)

    def logs(self) -> str:
        """Every daemon log, for a failure message."""
        out = []
        for log in sorted((self.root / "log").glob("*")):
            out.append(f"== {log.name}\n{log.read_text(errors='replace')[-4000:]}")
        return "\n".join(out) + ("\n== last command\n" + self.last_output if self.last_output else "")

    def stop(self) -> None:
        """Stop the daemons this harness started, newest first, and wait for them."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait(what: str, cluster: SlurmCluster, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for proc in cluster.procs:
            if proc.poll() is not None:
                program = proc.args[0] if isinstance(proc.args, list) else proc.args
                raise RuntimeError(f"{program!s} exited ({proc.returncode}) while waiting for {what}\n{cluster.logs()}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {START_TIMEOUT_S:.0f} s\n{cluster.logs()}")


def _succeeds(cluster: SlurmCluster, *args: str) -> Callable[[], bool]:
    """A readiness check: ``args`` exits 0 (its last output is kept in ``cluster.last_output``)."""

    def check() -> bool:
        result = cluster.run(*args, check=False)
        cluster.last_output = f"$ {' '.join(args)} -> {result.returncode}\n{result.stdout}{result.stderr}"
        return result.returncode == 0

    return check


def _spawn(cluster: SlurmCluster, name: str, args: list[str]) -> None:
    out = open(cluster.root / "log" / f"{name}.out", "wb")  # noqa: SIM115 - the daemon keeps it open
    cluster.procs.append(subprocess.Popen(args, env=cluster.env, stdout=out, stderr=subprocess.STDOUT))


@dataclass
class Database:
    """munged and mariadbd, shared by the clusters of one test module (each gets its own database)."""

    root: Path
    env: dict[str, str]
    msock: Path
    db_port: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    used: int = 0

    def stop(self) -> None:
        """Stop munged and mariadbd."""
        SlurmCluster(self.root, self.env, self.procs).stop()


def start_database(root: Path) -> Database:
    """Start munged (own key and socket) and mariadbd (own data directory, 127.0.0.1) under ``root``.

    Raises:
        RuntimeError: a daemon exited or did not become ready, with its log.
    """
    for sub in ("log", "db", "run"):
        (root / sub).mkdir(parents=True)
    root.chmod(0o755)
    munge_dir = root / "munge"
    munge_dir.mkdir(mode=0o755)
    key = munge_dir / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    msock = munge_dir / "munge.sock"
    env = {**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"}
    db = Database(root, env, msock, _free_port())
    holder = SlurmCluster(root, env, db.procs)
    try:
        munged = ["munged", "-F", "-f", f"--socket={msock}", f"--key-file={key}"]
        munged += [f"--pid-file={root / 'run/munged.pid'}", f"--seed-file={munge_dir / 'seed'}"]
        _spawn(holder, "munged", [*munged, f"--log-file={root / 'log/munged.log'}"])
        _wait("munged", holder, msock.exists)
        install = ["mariadb-install-db", "--no-defaults", f"--datadir={root / 'db'}"]
        install += ["--auth-root-authentication-method=normal", "--skip-test-db"]
        as_root = ["--user=root"] if os.geteuid() == 0 else []
        subprocess.run([*install, *as_root], env=env, capture_output=True, check=True, timeout=120)
        mysqld = ["mariadbd", "--no-defaults", f"--datadir={root / 'db'}", "--bind-address=127.0.0.1"]
        mysqld += [f"--port={db.db_port}", f"--socket={root / 'run/mysql.sock'}", "--skip-name-resolve"]
        mysqld += [f"--pid-file={root / 'run/mariadbd.pid'}", "--innodb-buffer-pool-size=16M"]
        _spawn(holder, "mariadbd", [*mysqld, *as_root])
        _wait("mariadbd", holder, lambda: _connects(db.db_port))
    except BaseException:
        db.stop()
        raise
    return db


def start(
    db: Database, root: Path, slurm_conf_body: str, gres_conf: str, sacctmgr_script: Path, node_names: list[str]
) -> SlurmCluster:
    """Start slurmdbd (a fresh database in ``db``) and slurmctld under ``root``.

    Args:
        db: the running :class:`Database`.
        root: an empty directory.
        slurm_conf_body: lines appended to the harness's own ``slurm.conf`` settings
            (the exported fragment is included with ``Include``).
        gres_conf: the ``gres.conf`` text.
        sacctmgr_script: the exported script: run (``sh``) before slurmctld starts, and
            with ``limits`` once slurmctld has registered its TRES with slurmdbd.
        node_names: the configured nodes: slurmctld runs in its own mount namespace whose
            ``/etc/hosts`` (a bind mount, the host's file untouched) gives each 127.0.0.1.

    Returns:
        The running :class:`SlurmCluster` (call :meth:`SlurmCluster.stop`).

    Raises:
        RuntimeError: a daemon exited or did not become ready, with every log.
    """
    user = getpass.getuser()
    for sub in ("etc", "log", "state", "spool", "run"):
        (root / sub).mkdir(parents=True)
    db.used += 1
    env = {**db.env, "SLURM_CONF": str(root / "etc" / "slurm.conf")}
    cluster = SlurmCluster(root, env)
    dbd_port, ctld_port = _free_port(), _free_port()
    auth = f"AuthType=auth/munge\nAuthInfo=socket={db.msock}\n"
    dbd_conf = root / "etc" / "slurmdbd.conf"
    dbd_conf.write_text(
        auth + f"DbdHost=localhost\nDbdAddr=127.0.0.1\nDbdPort={dbd_port}\nSlurmUser={user}\n"
        f"PidFile={root / 'run/slurmdbd.pid'}\nLogFile={root / 'log/slurmdbd.log'}\n"
        f"StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\nStoragePort={db.db_port}\n"
        f"StorageUser=root\nStorageLoc=slurm_acct_db_{db.used}\n"
    )
    dbd_conf.chmod(0o600)
    (root / "etc" / "slurm.conf").write_text(
        f"ClusterName={CLUSTER}\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort={ctld_port}\n"
        f"SlurmdPort={_free_port()}\nSlurmUser={user}\n" + auth + "CredType=cred/munge\n"
        f"StateSaveLocation={root / 'state'}\nSlurmdSpoolDir={root / 'spool'}\n"
        f"SlurmctldPidFile={root / 'run/slurmctld.pid'}\nSlurmctldLogFile={root / 'log/slurmctld.log'}\n"
        "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
        "MpiDefault=none\nMailProg=/bin/true\n"
        f"AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=127.0.0.1\n"
        f"AccountingStoragePort={dbd_port}\n"
        # for the slurmdbd connection Slurm takes the MUNGE socket from AccountingStoragePass
        f"AccountingStoragePass={db.msock}\n" + slurm_conf_body
    )
    (root / "etc" / "gres.conf").write_text(gres_conf)
    try:
        _spawn(cluster, "slurmdbd", ["slurmdbd", "-D"])
        _wait("slurmdbd", cluster, lambda: _connects(dbd_port))
        _wait("sacctmgr", cluster, _succeeds(cluster, "sacctmgr", "-i", "add", "cluster", CLUSTER))
        _run_script(cluster, sacctmgr_script)
        hosts = root / "etc" / "hosts"
        hosts.write_text("".join(f"127.0.0.1 {n}\n" for n in ["localhost", *node_names]))
        unshare = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--mount"]
        mount_hosts = 'mount --bind "$1" /etc/hosts && exec slurmctld -D -i'
        _spawn(cluster, "slurmctld", [*unshare, "sh", "-c", mount_hosts, "sh", str(hosts)])
        _wait("slurmctld", cluster, _succeeds(cluster, "scontrol", "show", "partition"))
        # slurmctld has now registered AccountingStorageTRES with slurmdbd: only now does
        # sacctmgr know gres/gpu for the GrpTRES limits
        _run_script(cluster, sacctmgr_script, "limits")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _run_script(cluster: SlurmCluster, script: Path, *args: str) -> None:
    result = cluster.run("sh", str(script), *args, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"sh {script} {' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
        )


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False
