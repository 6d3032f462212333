"""The ``labgang`` that ``labgang install --venv`` makes, end to end (issue 23 item 5).

A real ``labgang install --venv`` into a temporary venv made from the system Python: a regular
(non-editable) install built by pip from a copy of this checkout, whose ``bin/labgang`` is the
launcher that starts as ``python -I -S``. The venv's other distributions are linked in from the
development venv first (as bench/regular_install.py does), so pip finds them installed and downloads
only what its build needs. A ``.pth`` file in the venv appends a line to a file at every start that
runs ``site``: the hot commands must never write it, everything else must write it once (the full
path, as pip's script runs). ``labgang up --simulate`` itself runs through the installed command
(the full path: ``coordinator``/``agent`` daemons), and the CLI is checked against the same installed
code run with ``site`` (``python bin/labgang``, what pip's console script does) for exit codes,
``argv[0]`` in messages, standard input and output, Ctrl-C and ``run --pty``.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SYSTEM_PYTHON = Path("/usr/bin/python3")
REPO = Path(__file__).resolve().parents[2]
H100X8 = REPO / "config" / "sim" / "h100x8.toml"
# What the development venv holds that the new venv has its own of, or must not get (the editable labgang).
NOT_LINKED = (
    "__editable__",
    "labgang",
    "pip",
    "setuptools",
    "pkg_resources",
    "_distutils_hack",
    "distutils-",
    "__pycache__",
)
# Debian's site may read a .pth file twice in one start: the marker names the process.
MARKER_PTH = "import os; m = os.environ.get('LG_SITE_MARK'); m and open(m, 'a').write(f'{os.getpid()}\\n')\n"


@dataclass
class Installed:
    """The installed venv: ``labgang`` (the launcher), ``python``, the install's output, the marker file."""

    venv: Path
    prefix: Path
    output: str
    mark: Path

    @property
    def labgang(self) -> Path:
        return self.venv / "bin" / "labgang"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def site_starts(self) -> int:
        """How many interpreter starts ran ``site`` since the last call (and forget them)."""
        if not self.mark.exists():
            return 0
        count = len({line.split()[0] for line in self.mark.read_text().splitlines()})
        self.mark.unlink()
        return count


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"{SYSTEM_PYTHON} is missing")
    if subprocess.run([str(SYSTEM_PYTHON), "-c", "import ensurepip, venv"], capture_output=True).returncode != 0:
        pytest.skip(f"{SYSTEM_PYTHON} cannot make a venv (Debian: apt-get install python3-venv)")
    base = Path(os.environ.get("TMPDIR", "/tmp")) / f"lglaunch-{os.getpid()}-{os.urandom(3).hex()}"
    base.mkdir(mode=0o755)
    base.chmod(0o755)  # every user must reach the venv, or install --venv refuses it
    try:
        venv = base / "venv"
        subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", str(venv)], check=True)
        ours = Path(sysconfig.get_paths()["purelib"])
        theirs = next((venv / "lib").glob("python3*/site-packages"))
        for entry in sorted(ours.iterdir()):
            if not entry.name.startswith(NOT_LINKED) and not (theirs / entry.name).exists():
                (theirs / entry.name).symlink_to(entry)
        done = subprocess.run(
            [sys.executable, "-m", "labgang.launcher", "install", "--venv", str(venv), "--prefix", str(base / "root")],
            capture_output=True,
            text=True,
            check=False,
            timeout=500,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        (theirs / "zz-labgang-test-mark.pth").write_text(MARKER_PTH)
        yield Installed(venv, base / "root", done.stdout, base / "site-starts")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def up(installed: Installed) -> Iterator[dict[str, str]]:
    """``labgang up --simulate`` (8 H100) started through the installed command; the CLI's environment."""
    state = installed.venv.parent / "state"
    state.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LABGANG_", "PYTHON"))}
    env["LABGANG_STATE_DIR"] = str(state)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    daemons = dict(env)  # without the marker: only the commands under test count their starts
    env["LG_SITE_MARK"] = str(installed.mark)
    with open(state.parent / "up.log", "wb") as log:
        proc = subprocess.Popen(
            [str(installed.labgang), "up", "--simulate", str(H100X8)],
            env=daemons,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while subprocess.run([str(installed.labgang), "queues"], env=env, capture_output=True).returncode != 0:
            assert proc.poll() is None and time.monotonic() < deadline, (state.parent / "up.log").read_text()
            time.sleep(0.2)
        yield env
    finally:
        proc.send_signal(signal.SIGINT)  # the pid of the restarted interpreter: exec kept it
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            raise
    assert code == 0, (state.parent / "up.log").read_text()


def cli(installed: Installed, env: dict[str, str], *args: str, site: bool = False, **kw) -> subprocess.CompletedProcess:
    """The installed ``labgang ARGS`` (the launcher), or with ``site=True`` the same file run by the venv's
    python with ``site``, as pip's console script runs."""
    argv = [str(installed.python), str(installed.labgang)] if site else [str(installed.labgang)]
    if "stdout" not in kw:
        kw.setdefault("capture_output", True)
    return subprocess.run([*argv, *args], env=env, timeout=120, check=False, **kw)


def test_install_venv_makes_a_regular_install_whose_command_starts_without_site(installed):
    assert "regular install; hot commands start without site (python -I -S)" in installed.output
    lines = installed.labgang.read_text().splitlines()
    assert lines[0] == f"#!{installed.python} -IS"
    site_packages = next((installed.venv / "lib").glob("python3*/site-packages"))
    assert f'    sys.path.extend(["{site_packages}"])' in lines  # written as JSON (double quotes)
    assert not list(site_packages.glob("__editable__*"))
    where = subprocess.run(
        [str(installed.python), "-c", "import labgang.launcher as m; print(m.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(site_packages)), where  # the package itself, not a path into the checkout
    assert (installed.venv / "share/labgang/systemd/labgang-agent.service").is_file()
    assert os.readlink(installed.prefix / "usr/local/bin/labgang") == str(installed.labgang)


def test_the_installed_labgang_installs_units_without_the_checkout(installed, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = cli(installed, env, "install", "--print", "--role", "agent", "--prefix", str(tmp_path), text=True)
    assert done.returncode == 0, done.stderr
    assert f"ExecStart={installed.labgang} agent --config /etc/labgang/agent.toml" in done.stdout
    assert str(installed.venv / "share/labgang") not in done.stderr
    # remaking (upgrading) the venv from it needs the checkout, named with --source
    again = ("install", "--print", "--venv", str(installed.venv))
    refused = cli(installed, env, *again, text=True)
    assert refused.returncode == 1 and "is not a labgang source checkout" in refused.stderr, refused.stderr
    assert "--source" in refused.stderr and refused.stdout == ""
    upgrade = cli(installed, env, *again, "--source", str(REPO), text=True)
    assert upgrade.returncode == 0, upgrade.stderr
    assert f"# would run: {installed.python} -m pip install --quiet {REPO}" in upgrade.stdout


def test_hot_commands_start_without_site_and_answer_as_pips_script(installed, up):
    installed.site_starts()
    submitted = cli(installed, up, "submit", "--", "true", text=True)
    assert submitted.returncode == 0 and submitted.stdout.strip().isdigit(), submitted.stderr
    job = submitted.stdout.strip()
    queued = cli(installed, up, "queue", text=True)
    assert queued.returncode == 0 and "JOBID" in queued.stdout, queued.stderr
    assert installed.site_starts() == 0  # none of them ran site
    deadline = time.monotonic() + 60
    while json.loads(cli(installed, up, "show", "--json", job).stdout)["job"]["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # `queue` once nothing is active: the table (header only, as the coordinator renders it for view=text)
    # and, with a filter, the note on standard error; a table with jobs has their AGE, which moves
    for args in (
        ("show", job),
        ("show", "--json", job),
        ("cancel", job),
        ("show", "999999"),
        ("queue",),
        ("queue", "-t", "R"),
    ):
        fast = cli(installed, up, *args)
        assert installed.site_starts() == 0, args
        full = cli(installed, up, *args, site=True)
        assert installed.site_starts() == 1, args
        assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr), args


def test_hot_commands_find_the_instance_through_the_system_config_as_pips_script_does(installed, up):
    """Without LABGANG_STATE_DIR a command finds this machine's labgang through the system config that
    `labgang install` writes (here the venv's own, read first): read without tomllib on the fast path
    (tests/agent/test_plain_toml.py), the same answers as pip's script gives."""
    config = installed.venv / "etc" / "labgang" / "system.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'# as labgang install writes it\nstate_dir = "{up["LABGANG_STATE_DIR"]}"\n')
    found = {k: v for k, v in up.items() if k != "LABGANG_STATE_DIR"}
    try:
        installed.site_starts()
        submitted = cli(installed, found, "submit", "--", "true", text=True)  # its id, from the Location header
        assert submitted.returncode == 0 and submitted.stdout.strip().isdigit(), submitted.stderr
        job = submitted.stdout.strip()
        assert installed.site_starts() == 0
        deadline = time.monotonic() + 60
        while json.loads(cli(installed, found, "show", "--json", job).stdout)["job"]["state"] != "succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        installed.site_starts()
        for args in (
            ("queue",),
            ("queue", "-t", "R"),
            ("show", job),  # the coordinator's text (view=text), ranks' START and END in local time
            ("cancel", job),  # already succeeded: read as a row (view=queue)
            ("show", "999999"),
            ("cancel", "999999"),
        ):
            fast = cli(installed, found, *args)
            assert installed.site_starts() == 0, args
            full = cli(installed, found, *args, site=True)
            assert installed.site_starts() == 1, args
            assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr), args
            assert b"no labgang coordinator" not in fast.stderr, args  # it did reach the one running
        assert cli(installed, found, "queue").stdout.startswith(b"JOBID")
    finally:
        config.unlink()


def test_other_commands_restart_with_site_and_answer_as_pips_script_whatever_argv0(installed, up, tmp_path):
    installed.site_starts()
    for name in ("labgang", "lg"):
        link = tmp_path / name
        link.symlink_to(installed.labgang)
        for args in (("nodes", "--bogus"), ("submit", "-g", "many", "--", "true"), ("cancel", "nope"), ("--version",)):
            fast = subprocess.run([str(link), *args], env=up, capture_output=True, timeout=120, check=False)
            assert installed.site_starts() == 1, args  # the full path: one start with site
            full = subprocess.run(
                [str(installed.python), str(link), *args], env=up, capture_output=True, timeout=120, check=False
            )
            installed.site_starts()
            assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr), args
        usage = subprocess.run([str(link), "nodes", "--bogus"], env=up, capture_output=True, text=True, check=False)
        # labgang names itself whatever argv[0] is (click's prog_name), as pip's script does
        assert (usage.returncode, usage.stderr.split(":")[0]) == (2, "labgang nodes"), usage.stderr
        installed.site_starts()


def test_python_variables_that_change_output_take_the_full_path(installed, up):
    installed.site_starts()
    assert cli(installed, {**up, "PYTHONPATH": "/nonexistent"}, "queue").returncode == 0
    assert installed.site_starts() == 0  # ignored on purpose: only the venv's site-packages
    assert cli(installed, {**up, "PYTHONIOENCODING": "latin-1"}, "queue").returncode == 0
    assert installed.site_starts() == 1  # honoured, as pip's script would
    # PYTHONUNBUFFERED (containers set it) is applied without a second start: stdout and stderr into one
    # pipe come in the order pip's script writes them
    unbuffered = {**up, "PYTHONUNBUFFERED": "1"}
    fast = cli(installed, unbuffered, "queue", "-t", "PD", stderr=subprocess.STDOUT, stdout=subprocess.PIPE)
    assert installed.site_starts() == 0
    full = cli(installed, unbuffered, "queue", "-t", "PD", stderr=subprocess.STDOUT, stdout=subprocess.PIPE, site=True)
    assert (fast.returncode, fast.stdout) == (full.returncode, full.stdout)
    assert fast.returncode == 0 and b"JOBID" in fast.stdout, fast.stdout


def test_run_streams_stdin_and_ends_with_the_ranks_status(installed, up):
    for site in (False, True):
        done = cli(installed, up, "run", "--", "sh", "-c", "wc -c; exit 3", input=b"x" * 70000, site=site)
        assert (done.returncode, done.stdout.split()) == (3, [b"70000"]), done.stderr


def test_ctrl_c_on_run_cancels_the_job(installed, up):
    proc = subprocess.Popen(
        [str(installed.labgang), "run", "--grace", "2s", "--", "sleep", "60"],
        env=up,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    seen = ""
    while " running on " not in seen:
        line = proc.stderr.readline()
        assert line, seen
        seen += line
    job = seen.split("labgang: submitted job ")[1].split()[0]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, seen
    assert f"labgang: cancelling job {job}" in proc.stderr.read()
    proc.stderr.close()
    assert json.loads(cli(installed, up, "show", "--json", job).stdout)["job"]["state"] == "cancelled"


def test_run_pty_gets_a_terminal(installed, up):
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [str(installed.labgang), "run", "--pty", "--", "sh", "-c", "tty; exit 5"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=up,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while proc.poll() is None or select.select([master], [], [], 0)[0]:
        assert time.monotonic() < deadline, seen
        if select.select([master], [], [], 0.2)[0]:
            try:
                seen += os.read(master, 65536)
            except OSError:  # EIO: the command closed the terminal
                break
    os.close(master)
    assert proc.wait(timeout=30) == 5, seen
    assert b"/dev/pts/" in seen, seen


def banner_of(log: Path, proc: subprocess.Popen | None = None) -> list[str]:
    """The lines of ``labgang up``'s banner in ``log`` (from its first line to ``try:`` and what follows it)."""
    deadline = time.monotonic() + 90
    while "try: " not in (text := log.read_text(errors="replace")):
        assert (proc is None or proc.poll() is None) and time.monotonic() < deadline, text
        time.sleep(0.1)
    # the banner is one write (click.echo, then a flush): the line after try: (if any) came with it
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("labgang up: coordinator and agent"))
    return lines[start:]


def test_the_installed_banner_suggests_a_command_that_runs_from_any_directory(installed, up):
    """Not ``python examples/ddp_allreduce.py`` (a checkout's path, a python maybe not on PATH): the venv's
    interpreter and the copy the install carries, absolute; what it needs when the venv has no torch."""
    lines = banner_of(installed.venv.parent / "up.log")
    [hint] = [line for line in lines if line.startswith("try: ")]
    command = hint.split(" -- ", 1)[1]
    interpreter, script = command.split(" ")
    assert Path(script) == installed.venv / "share" / "labgang" / "examples" / "ddp_allreduce.py"
    assert Path(script).is_file() and Path(interpreter).parent == installed.venv / "bin"
    assert os.access(interpreter, os.X_OK)
    torch = subprocess.run([interpreter, "-c", "import torch"], capture_output=True, check=False).returncode == 0
    after = lines[lines.index(hint) + 1 :]
    if torch:
        assert not any("needs torch" in line for line in after), lines
    else:
        assert after[:1] == [
            f"  (the example needs torch, which {installed.venv} does not have: {interpreter} -m pip install torch)"
        ], lines
    assert not any("this machine's instance" in line for line in lines)  # LABGANG_STATE_DIR: a private one


def test_roots_system_instance_says_in_its_banner_that_every_users_commands_reach_it(installed, up, tmp_path):
    """root's ``labgang up`` without LABGANG_STATE_DIR serves the system config's state directory (here the
    venv's own system.toml): the one instance every user's commands find first, and its banner says so."""
    state = tmp_path / "system"
    config = installed.venv / "etc" / "labgang" / "system.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'state_dir = "{state}"\n')
    env = {k: v for k, v in up.items() if k not in ("LABGANG_STATE_DIR", "LG_SITE_MARK")}
    log = tmp_path / "up.log"
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(installed.labgang), "up", "--simulate", str(H100X8)],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            lines = banner_of(log, proc)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
    finally:
        config.unlink()
    assert lines[1:4] == [
        f"  state dir: {state}",
        f"  socket:    {state / 'labgang.sock'}",
        "  this machine's instance: every user's labgang commands here reach it without setting anything",
    ], lines
