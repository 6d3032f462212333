"""The fast path of ``labgang submit/queue/cancel`` (launcher/cli/quick.py) against the click commands.

The click commands stay the one definition of the flags; the fast path must build the same
request for every command line it takes, and leave every other one to click.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from coordinator_harness import running_coordinator
from labgang.launcher.api.wire import UnixHTTPConnection
from labgang.launcher.cli import job_request, quick, submission
from table_ages import without_ages

ENV = {"HOME": "/home/u", "PATH": "/bin"}

SUBMIT_LINES = [
    ["--", "true"],
    ["true"],
    ["-n", "4", "-g", "2", "--", "python", "train.py", "--epochs", "3"],
    ["-n4", "-g2", "python", "x.py"],
    ["--workers=3", "--gpus-per-worker=1", "--name", "sweep-1", "--", "x"],
    ["--mig", "1g.10gb", "-q", "vision", "-p", "high", "--", "x"],
    ["-p", "-5", "--nodes", "2", "--gpu-model", "H100", "--topology", "nvlink", "--cpu-bind", "none", "x"],
    ["--min-workers", "2", "-n", "4", "--grace", "30s", "--time", "1h30m", "--no-requeue", "x"],
    ["--signal", "USR1@60", "--json", "--state-dir", "/tmp/sd", "--", "x", "--json"],
    ["-n", "2", "-n", "5", "x", "-n", "9"],  # the last -n before the command wins; after it, argv
    ["--array", "0-99%8", "--", "x"],
    ["--array=1,3,5-9", "-g", "2", "x"],
    ["-d", "afterok:12:13,singleton", "--", "x"],
    ["--dependency=afterok:4?afternotok:5", "-d7", "x"],  # the last one wins, as with click
    ["--time", "90", "x"],  # Slurm's forms: a bare number is minutes
    ["-t", "1-12:30", "--time=2:00:00", "x"],
    ["-t90s", "x"],
    ["--ntasks", "4", "--gpus-per-task", "2", "-N", "2", "-J", "sw", "--partition", "vision", "--qos", "high", "x"],
    ["-N2", "--job-name=sw", "x"],
    ["--begin", "2030-01-01T00:00", "x"],  # an absolute time: the same instant on both paths
    ["-b", "2030-01-01", "x"],
    ["-o", "out-%j-%t.txt", "--error=err-%x.txt", "x"],
    ["--wrap", "echo $HOME; hostname", "-n", "2"],  # sbatch's --wrap: a one-line /bin/sh script
    ["--wrap=python train.py", "-J", "w"],
]

# Command lines the fast path must hand to click (help, unknown, malformed or out of range).
NOT_FAST = [
    ["--wrap", "echo", "--", "true"],  # --wrap and a command: refused
    ["--wrap", " "],
    ["--wrap", "x", "-J", ""],  # an empty name is refused, not replaced by "wrap"
    ["--help"],
    ["-h", "x"],
    ["-n", "0", "x"],
    ["-n", "two", "x"],
    ["--bogus", "x"],
    ["--topology", "rack", "x"],
    ["--time", "soon", "x"],
    ["--time", "1:2:3:4", "x"],
    ["--begin", "soon", "x"],
    ["-o", "out-%q", "x"],  # a bad pattern: the builder refuses, click words it
    ["--signal", "BOGUS@1", "x"],
    ["--no-requeue=1", "x"],
    ["-n"],
    ["--mig", "1g.10gb", "-g", "2", "x"],  # excluded pair: the builder refuses, click words it
    ["--array", "5-2", "x"],  # a bad array spec: click words the error
    [],
]


def click_body(args: list[str]) -> dict[str, object]:
    ctx = submission.submit.make_context("submit", list(args))
    params = dict(ctx.params)
    params.pop("state_dir")
    params.pop("as_json")
    return submission.build_submission(**params, env=ENV, cwd="/work")


def fast_body(args: list[str]) -> dict[str, object]:
    options, argv = quick.parse(args, quick._submit_flags(), interspersed=False)
    options.pop("state_dir", None)
    options.pop("as_json", None)
    return job_request.build_submission(argv=argv, **options, env=ENV, cwd="/work")


@pytest.mark.parametrize("args", SUBMIT_LINES, ids=" ".join)
def test_fast_submit_builds_the_click_commands_body(args):
    assert fast_body(args) == click_body(args)


@pytest.mark.parametrize("args", NOT_FAST, ids=lambda a: " ".join(a) or "nothing")
def test_fast_submit_leaves_the_rest_to_click(args):
    with pytest.raises((quick.NotFast, job_request.SubmissionError)):
        fast_body(args)


@pytest.mark.parametrize("args", [["--help"], ["-a"], ["--user"], ["--all=1"]])
def test_fast_queue_leaves_the_rest_to_click(args):
    with pytest.raises(quick.NotFast):
        quick.parse(args, quick._QUEUE_FLAGS, interspersed=True)


def test_fast_cancel_refuses_bad_ids_without_sending_anything(tmp_path):
    with pytest.raises(quick.NotFast):
        quick.cancel(["--state-dir", str(tmp_path), "12", "x7"])
    with pytest.raises(quick.NotFast):
        quick.cancel(["--state-dir", str(tmp_path)])


HEAVY = (
    "click",
    "pydantic",
    "aiohttp",
    "textual",
    "importlib.metadata",
    "http.client",
    "email",
    "asyncio",
    "typing",
    "dataclasses",
    "socket",  # wire.py talks through _socket: the socket module's enums and selectors cost ~2 ms
    "selectors",
)


def run_fast(state_dir: str, *args: str) -> tuple[int, list[str], str]:
    """Run ``labgang ARGS`` through the console entry point in a fresh interpreter.

    Returns (exit status, the heavy modules it imported, its stdout before the report line).
    """
    code = (
        "import atexit, sys\n"
        "atexit.register(int)\n"  # quick.main then ends by SystemExit, not os._exit (see quick._leave)
        f"sys.argv = ['labgang', *{list(args)!r}]\n"
        "from labgang.launcher.cli import quick\n"
        "try:\n    quick.main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        f"print('REPORT', code, sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "LABGANG_STATE_DIR": state_dir}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    out, _, report = done.stdout.rpartition("REPORT ")
    status, heavy = report.split(" ", 1)
    return int(status), eval(heavy), out  # noqa: S307 - our own repr of a list of module names


def test_without_a_coordinator_the_fast_path_fails_in_one_line_without_heavy_imports(tmp_path):
    status, heavy, _ = run_fast(str(tmp_path), "queue")
    assert (status, heavy) == (1, [])


@pytest.fixture
def coordinator(tmp_path):
    """A real coordinator (no agent: jobs stay pending) on a temporary state directory."""
    yield from running_coordinator(tmp_path, "")


@pytest.fixture
def small_pages_coordinator(tmp_path):
    """:func:`coordinator` listing 4 jobs a page (``limits.page_size``): ``queue`` follows cursors."""
    yield from running_coordinator(tmp_path, "[limits]\npage_size = 4\n")


@pytest.mark.slow
def test_submit_queue_cancel_through_the_fast_path_against_a_real_coordinator(coordinator):
    status, heavy, out = run_fast(coordinator, "submit", "-n", "2", "--name", "fast", "--", "true")
    assert (status, heavy) == (0, [])
    job_id = out.strip()
    assert job_id.isdigit()

    status, heavy, out = run_fast(coordinator, "queue", "--json")
    assert (status, heavy) == (0, [])
    [job] = json.loads(out)["jobs"]
    assert (job["id"], job["name"], job["workers"], job["state"]) == (job_id, "fast", 2, "pending")

    status, heavy, out = run_fast(coordinator, "queue")
    assert (status, heavy) == (0, [])
    assert out.splitlines()[0].split()[0] == "JOBID" and "fast" in out.splitlines()[1]

    status, heavy, out = run_fast(coordinator, "cancel", job_id, job_id)
    assert (status, heavy, out) == (0, [], f"job {job_id}: cancelled\n")
    status, heavy, out = run_fast(coordinator, "cancel", job_id)
    assert (status, out) == (0, f"job {job_id}: already cancelled\n")


CLICK_MAIN = "import sys; from labgang.launcher.cli.main import main; sys.argv = ['labgang', *sys.argv[1:]]; main()"


def click_run(state_dir: str, *args: str) -> subprocess.CompletedProcess:
    """``labgang ARGS`` through the click group only (the pre-fast-path way), in a fresh interpreter."""
    env = {**os.environ, "LABGANG_STATE_DIR": state_dir}
    return subprocess.run([sys.executable, "-c", CLICK_MAIN, *args], capture_output=True, text=True, env=env)


def fast_run(state_dir: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LABGANG_STATE_DIR": state_dir}
    return subprocess.run([sys.executable, "-m", "labgang.launcher", *args], capture_output=True, text=True, env=env)


# Imported by urllib.parse (re and ipaddress) and kept off the hot path (launcher/api/wire.py
# builds query strings). The stdlib json module is kept off it too: it imports re, enum and
# collections, about one interpreter start in a regular install; the client reads and writes small
# bodies with launcher/api/jsontext.py (docs/cli-startup.md). The editable install's import hook
# loads them all before any command runs, so :func:`run_bare` measures without it.
STDLIB_HEAVY = ("urllib.parse", "ipaddress", "json", "re", "enum", "collections", "unicodedata")


def run_bare(
    state_dir: str, links: Path, *args: str, watched: tuple[str, ...] = STDLIB_HEAVY + HEAVY
) -> tuple[int, list[str], str]:
    """:func:`run_fast` in an interpreter started without ``site`` (``-S``): labgang is found
    through a ``labgang`` link to this checkout in ``links``, so nothing but the command itself
    imports modules. Returns (exit status, the ``watched`` modules loaded, stdout)."""
    if not (links / "labgang").exists():
        (links / "labgang").symlink_to(Path(__file__).resolve().parents[2], target_is_directory=True)
    code = (
        "import atexit, sys\n"
        "atexit.register(int)\n"  # quick.main then ends by SystemExit, not os._exit (see quick._leave)
        f"sys.argv = ['labgang', *{list(args)!r}]\n"
        "from labgang.launcher.cli import quick\n"
        "try:\n    quick.main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        f"print('REPORT', code, sorted(m for m in {watched!r} if m in sys.modules))\n"
    )
    env = {**os.environ, "LABGANG_STATE_DIR": state_dir, "PYTHONPATH": str(links)}
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, env=env)
    out, _, report = done.stdout.rpartition("REPORT ")
    status, loaded = report.split(" ", 1)
    return int(status), eval(loaded), out  # noqa: S307 - our own repr of a list of module names


@pytest.mark.slow
def test_submit_queue_cancel_show_import_nothing_heavy(small_pages_coordinator, tmp_path):
    """Neither urllib.parse, json, re nor anything of HEAVY is on the hot commands' path: query
    strings go through launcher/api/wire.py, requests and answers through launcher/api/jsontext.py."""
    coordinator = small_pages_coordinator
    status, loaded, out = run_bare(coordinator, tmp_path, "submit", "--name", "bare", "--time", "1h", "--", "true")
    job_id = out.strip()
    assert (status, loaded, job_id.isdigit()) == (0, [], True)
    for _ in range(5):  # several pages of the listing: each cursor goes into a query string
        run_bare(coordinator, tmp_path, "submit", "--name", "more", "--", "true")
    status, loaded, out = run_bare(coordinator, tmp_path, "queue")
    assert (status, loaded, len(out.splitlines())) == (0, [], 1 + 6)
    for args in (["queue", "--all"], ["queue", "-u", "some one"], ["show", job_id]):
        status, loaded, out = run_bare(coordinator, tmp_path, *args)
        assert (status, loaded) == (0, []), args
    status, loaded, out = run_bare(coordinator, tmp_path, "cancel", job_id)
    assert (status, loaded, out) == (0, [], f"job {job_id}: cancelled\n")


# labgang modules a hot command loads only when its flags or answer need them: each is one more module to
# find, read and run, about 0.1 ms of a 7 ms interpreter start in a regular install (docs/cli-startup.md).
ON_DEMAND = (
    "labgang.agent.mem_size",  # --mem, --mem-per-gpu, --gpu-mem
    "labgang.launcher.arrays",  # --array, cancel ID_[list]
    "labgang.launcher.job_filters",  # -u, -q, -t
    "labgang.launcher.jobtable",  # show's gang shape; queue against a coordinator without view=table
    "labgang.launcher.cli.policy_text",  # queues' PER USER and AT LIMIT cells
    "labgang.launcher.cli.format",  # show written here: --json, a coordinator that sends the JobView
    "labgang.launcher.cli.job_facts",  # cancel's job list; show written here
    "labgang.launcher.api.jsontext",  # a JSON body: submit's request, cancel's answers (show and queue get text)
    "labgang.launcher.text",  # submit --name that is not all printable; show written here
    "labgang.agent.paths",  # finding the coordinator without a state directory (the system config)
    "labgang.launcher.api.discovery",
    # `from __future__ import annotations` runs an import of the module __future__ (0.4M instructions): the
    # modules a plain hot command loads quote their annotations instead (docs/cli-startup.md)
    "__future__",
)


@pytest.mark.slow
def test_plain_hot_commands_load_no_module_their_flags_do_not_need(coordinator, tmp_path):
    def loaded(*args: str) -> list[str]:
        status, found, _ = run_bare(coordinator, tmp_path, *args, watched=ON_DEMAND)
        assert status == 0, args
        return found

    job_id = run_bare(coordinator, tmp_path, "submit", "--", "true")[2].strip()
    assert loaded("submit", "--", "true") == ["labgang.launcher.api.jsontext"]
    assert loaded("queue") == ["labgang.launcher.cli.job_facts"]  # queue_listing: the coordinator's text, printed
    assert loaded("show", job_id) == []  # the coordinator's text (view=text), printed
    assert loaded("cancel", job_id) == ["labgang.launcher.api.jsontext", "labgang.launcher.cli.job_facts"]
    shown_here = ["labgang.launcher.api.jsontext", "labgang.launcher.cli.format", "labgang.launcher.cli.job_facts"]
    assert loaded("show", "--json", job_id) == [
        "__future__",  # format.py and the modules it loads have it: --json is not a hot case
        *shown_here,
        "labgang.launcher.jobtable",
        "labgang.launcher.text",
    ]
    # the same commands with the flags that need them do load them (the check sees what it watches); the
    # modules only those flags load keep `from __future__ import annotations`, so __future__ comes with them
    status, found, array_id = run_bare(
        coordinator, tmp_path, "submit", "--mem", "1G", "--array", "0-1", "--", "true", watched=ON_DEMAND
    )
    assert (status, found) == (
        0,
        ["__future__", "labgang.agent.mem_size", "labgang.launcher.api.jsontext", "labgang.launcher.arrays"],
    )
    assert loaded("queue", "-t", "PD") == [
        "__future__",
        "labgang.launcher.cli.job_facts",
        "labgang.launcher.job_filters",
    ]
    assert loaded("cancel", f"{array_id.strip()}_[0-1]") == [
        "__future__",
        "labgang.launcher.api.jsontext",
        "labgang.launcher.arrays",
        "labgang.launcher.cli.job_facts",
    ]
    assert loaded("queues") == [
        "__future__",
        "labgang.launcher.api.jsontext",
        "labgang.launcher.cli.format",
        "labgang.launcher.cli.policy_text",
        "labgang.launcher.jobtable",
        "labgang.launcher.text",
    ]
    status, found, _ = run_bare(coordinator, tmp_path, "submit", "--name", "caf\u00e9", "--", "true", watched=ON_DEMAND)
    assert (status, found) == (0, ["labgang.launcher.api.jsontext"])  # printable: no text.py


@pytest.mark.slow
def test_show_and_logs_through_the_fast_path_answer_as_the_click_commands(coordinator):
    _, _, out = run_fast(coordinator, "submit", "-n", "2", "--name", "seen", "--", "true")
    job_id = out.strip()

    status, heavy, out = run_fast(coordinator, "show", "--json", job_id)
    assert (status, heavy) == (0, [])
    shown = json.loads(out)["job"]
    assert (shown["id"], shown["name"], shown["state"]) == (job_id, "seen", "pending")
    assert shown == json.loads(click_run(coordinator, "show", "--json", job_id).stdout)["job"]

    status, heavy, out = run_fast(coordinator, "show", job_id)
    assert (status, heavy) == (0, [])
    assert out.splitlines()[0] == click_run(coordinator, "show", job_id).stdout.splitlines()[0]

    # a pending job has no output: said on stderr, exit 0, as the click command says it
    for args in (["logs", job_id], ["logs", "-r", "1", job_id], ["logs", "--rank", "2", job_id], ["show", "999"]):
        fast, slow = fast_run(coordinator, *args), click_run(coordinator, *args)
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr), args
    assert fast_run(coordinator, "logs", "--rank", "2", job_id).returncode == 2
    assert "has not started (PENDING" in fast_run(coordinator, "logs", job_id).stderr
    status, heavy, _ = run_fast(coordinator, "logs", job_id)
    assert (status, [m for m in heavy if m != "typing"]) == (0, [])  # follow.py's not_started imports typing


@pytest.mark.slow
def test_a_refusal_on_the_fast_path_reads_as_the_click_commands(coordinator):
    env = {**os.environ, "LABGANG_STATE_DIR": coordinator}
    fast = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "submit", "-q", "nope", "--", "true"],
        capture_output=True,
        text=True,
        env=env,
    )
    from click.testing import CliRunner
    from labgang.launcher.cli.main import cli

    slow = CliRunner().invoke(cli, ["submit", "-q", "nope", "--", "true"], env=env)
    assert fast.returncode == slow.exit_code != 0
    assert fast.stderr.strip() == slow.output.strip()
    assert fast.stderr.startswith("labgang submit: -q/--queue: ")
    status, _, _ = run_fast(coordinator, "cancel", "999")
    assert status == 1


def test_wire_reads_content_length_chunked_and_close_delimited_bodies(tmp_path):
    import socket
    import threading

    path = str(tmp_path / "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    answers = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Next-Offset: 7\r\n\r\nhello",
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\ngone",
    ]
    requests: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            for answer in answers:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                requests.append(data)
                conn.sendall(answer)

    thread = threading.Thread(target=serve)
    thread.start()
    conn = UnixHTTPConnection(path, 5.0)
    first = conn.request("GET", "/v1/jobs?all=1", None, {"Accept": "application/json"})
    second = conn.request("POST", "/v1/jobs", b"", {})
    third = conn.request("GET", "/x", None, {})
    thread.join()
    server.close()
    assert (first.status, first.body, first.headers["X-Next-Offset"], first.will_close) == (200, b"hello", "7", False)
    assert (second.status, second.body) == (201, b"abcde")
    assert (third.status, third.body, third.will_close) == (404, b"gone", True)
    assert requests[0].startswith(b"GET /v1/jobs?all=1 HTTP/1.1\r\n")
    assert b"Content-Length: 0\r\n" in requests[1]


@pytest.mark.parametrize(
    "args", [["-f", "3"], ["--follow", "3"], ["--attempt", "0", "3"], ["-r", "-1", "3"], ["3", "4"], ["x"], []]
)
def test_fast_logs_leaves_follow_attempt_and_bad_input_to_click(args, tmp_path):
    with pytest.raises(quick.NotFast):
        quick.logs(["--state-dir", str(tmp_path), *args])


@pytest.mark.parametrize("args", [["--help"], ["3", "4"], ["0"], []])
def test_fast_show_leaves_bad_input_to_click(args, tmp_path):
    with pytest.raises(quick.NotFast):
        quick.show(["--state-dir", str(tmp_path), *args])


@pytest.mark.slow
def test_cancel_of_an_unknown_job_names_it_once_on_both_paths(coordinator):
    for run in (fast_run, click_run):
        result = run(coordinator, "cancel", "999")
        assert (result.returncode, result.stdout, result.stderr) == (1, "", "labgang cancel: no job 999\n"), run


@pytest.mark.slow
def test_cancel_of_an_unknown_array_task_names_it_once_on_both_paths(coordinator):
    for run in (fast_run, click_run):
        result = run(coordinator, "cancel", "1_99")
        assert (result.returncode, result.stdout, result.stderr) == (1, "", "labgang cancel: no job 1_99\n"), run


@pytest.mark.slow
def test_history_of_a_user_this_machine_does_not_have_says_so(coordinator):
    unknown = click_run(coordinator, "history", "-u", "nobodyatall")
    assert unknown.returncode == 0 and unknown.stdout.startswith("JOBID"), unknown.stderr
    assert unknown.stderr == (
        "labgang history: note: no job of user nobodyatall\n"
        "labgang history: note: no user 'nobodyatall' on this machine (is the name right?)\n"
    )
    me = pwd.getpwuid(os.geteuid()).pw_name  # whoever runs the tests
    known = click_run(coordinator, "history", "-u", me)
    assert (known.returncode, known.stderr) == (0, f"labgang history: note: no job of user {me}\n")


@pytest.mark.slow
def test_history_of_a_queue_the_cluster_does_not_have_says_so_on_both_paths(coordinator):
    for run in (fast_run, click_run):
        unknown = run(coordinator, "history", "--queue", "nosuch")
        assert unknown.returncode == 0 and unknown.stdout.startswith("JOBID"), unknown.stderr
        assert unknown.stderr == (
            "labgang history: note: no job of any user matches queue nosuch\n"  # root: every user's
            "labgang history: note: no queue 'nosuch' in this cluster (queues: default; is the name right?)\n"
        ), run
        known = run(coordinator, "history", "--queue", "default")
        note = "labgang history: note: no job of any user matches queue default\n"
        assert (known.returncode, known.stderr) == (0, note), run


@pytest.mark.slow
def test_an_array_through_the_fast_path_folds_and_cancels_as_the_click_commands(coordinator):
    """submit --array, queue (pending tasks folded into one line), show and cancel of a task and
    of the whole array: the fast path imports nothing heavy and prints what click prints."""
    status, heavy, out = run_fast(coordinator, "submit", "--array", "0-9%3", "--name", "sweep", "--", "true")
    assert (status, heavy) == (0, [])
    array_id = out.strip()
    assert array_id.isdigit()
    status, heavy, table = run_fast(coordinator, "queue")
    assert (status, heavy) == (0, [])
    [row] = table.splitlines()[1:]  # no agent: every task pends, folded into one row
    assert row.split()[0] == f"{array_id}_[0-9%3]"
    assert without_ages(table) == without_ages(click_run(coordinator, "queue").stdout)  # a second may pass
    status, heavy, out = run_fast(coordinator, "queue", "--json")
    assert [job["id"] for job in json.loads(out)["jobs"]] == [f"{array_id}_{i}" for i in range(10)]
    status, heavy, out = run_fast(coordinator, "show", "--json", f"{array_id}_7")
    assert (status, heavy) == (0, [])
    assert json.loads(out)["job"]["array_index"] == 7
    status, heavy, out = run_fast(coordinator, "cancel", f"{array_id}_9")
    assert (status, heavy, out) == (0, [], f"job {array_id}_9: cancelled\n")
    status, heavy, out = run_fast(coordinator, "cancel", array_id)
    assert (status, out) == (0, f"array {array_id}: 9 cancelled, 1 already finished\n")
    slow = click_run(coordinator, "cancel", array_id)
    assert (slow.returncode, slow.stdout) == (0, f"array {array_id}: 10 already finished\n")


# ----- history, queues and run -------------------------------------------------------------------

HISTORY_LINES = [
    [],
    ["-u", "bob", "-q", "vision"],
    ["--user=all", "--queue=batch", "--json"],
    ["-s", "failed", "--state", "CANCELLED", "-sRunning"],  # repeated, case-insensitive, attached
    ["-s", "PD,r", "-s", "cd,Pending"],  # squeue's codes, comma-separated
    ["--since", "2026-11-30", "--until", "2026-12-01 14:30", "--limit", "5"],
    ["--limit=100000", "--state-dir", "/tmp/sd"],
]


@pytest.mark.parametrize("args", HISTORY_LINES, ids=lambda a: " ".join(a) or "nothing")
def test_fast_history_reads_the_flags_as_click_does(args):
    from labgang.launcher.cli import history

    options, positional = quick.parse(args, quick._HISTORY_FLAGS, interspersed=True)
    params = history.history.make_context("history", list(args)).params
    assert positional == []
    assert options.get("user") == params["user"]
    assert options.get("queue") == params["queue"]
    assert tuple(options.get("states", ())) == params["states"]
    assert (options.get("since"), options.get("until")) == (params["since"], params["until"])
    assert options.get("limit", 1000) == params["limit"]
    assert options.get("as_json", False) == params["as_json"]


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-s", "lost"],
        ["--limit", "0"],
        ["--limit", "100001"],
        ["--since", "soon"],
        ["--since", "2h", "--until", "3h"],  # since after until: click words the error
        ["--json=1"],
        ["extra"],
    ],
)
def test_fast_history_leaves_the_rest_to_click(args, tmp_path):
    with pytest.raises(quick.NotFast):
        quick.history(["--state-dir", str(tmp_path), *args])


@pytest.mark.parametrize("args", [["--help"], ["x"], ["--all"]])
def test_fast_queues_leaves_the_rest_to_click(args, tmp_path):
    with pytest.raises(quick.NotFast):
        quick.queues(["--state-dir", str(tmp_path), *args])


RUN_LINES = [
    ["--", "true"],
    ["-n", "4", "-g", "2", "--all-ranks", "--", "python", "train.py"],
    ["--all-ranks", "-n2", "--grace", "2s", "--time", "1m", "--signal", "USR1@5", "x", "--all-ranks"],
    ["-Q", "-n", "2", "--", "x", "-Q"],
    ["--quiet", "--all-ranks", "x"],
]


def run_bodies(args: list[str]) -> tuple[dict[str, object], dict[str, object], tuple[bool, bool], tuple[bool, bool]]:
    """(fast body, click body, fast (--all-ranks, -Q), click (--all-ranks, -Q)) of ``labgang run ARGS``."""
    options, argv = quick.parse(args, quick._run_flags(), interspersed=False)
    options.pop("state_dir", None)
    fast_flags = (options.pop("all_ranks", False), options.pop("quiet", False))
    fast = job_request.build_submission(argv=argv, **options, env=ENV, cwd="/work")
    params = dict(submission.run.make_context("run", list(args)).params)
    params.pop("state_dir")
    click_flags = (params.pop("all_ranks"), params.pop("quiet"))
    return fast, submission.build_submission(**params, env=ENV, cwd="/work"), fast_flags, click_flags


@pytest.mark.parametrize("args", RUN_LINES, ids=" ".join)
def test_fast_run_builds_the_click_commands_body(args):
    fast, slow, fast_flags, click_flags = run_bodies(args)
    assert (fast, fast_flags) == (slow, click_flags)
    assert fast_flags[1] == (args[0] in ("-Q", "--quiet"))  # a -Q after the command is the command's


@pytest.mark.parametrize("args", [["--json", "x"], ["--help"], ["-n", "0", "x"], []])
def test_fast_run_leaves_the_rest_to_click(args, tmp_path):
    with pytest.raises((quick.NotFast, job_request.SubmissionError)):
        quick.run(["--state-dir", str(tmp_path), *args])


@pytest.mark.slow
def test_history_and_queues_through_the_fast_path_answer_as_the_click_commands(coordinator):
    _, _, out = run_fast(coordinator, "submit", "--name", "hist", "--", "true")
    job_id = out.strip()
    run_fast(coordinator, "cancel", job_id)  # a finished job: its history no longer changes with the clock
    run_fast(coordinator, "submit", "--name", "waits", "--", "true")
    me = pwd.getpwuid(os.geteuid()).pw_name
    for args in (
        ["queues"],
        ["queues", "--json"],
        ["history", "--json", "-s", "cancelled"],
        ["history", "-s", "CANCELLED", "--limit", "3"],
        ["history", "-u", "nobodyatall"],  # a note on stderr, on both paths
        ["history", "-u", me, "-s", "failed"],
        ["history", "--since", "2h", "--until", "2h"],  # since after until: click's error, on both
        ["history", "-s", "cancelled", "--limit", "1"],  # as many rows as the limit: a note on stderr
        ["history", "--json", "-s", "cancelled", "--limit", "1"],
    ):
        fast, slow = fast_run(coordinator, *args), click_run(coordinator, *args)
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr), args
    limited = fast_run(coordinator, "history", "--limit", "1")
    note = "labgang history: showing the 1 most recently submitted jobs; older ones with --limit N or --until\n"
    assert limited.stderr == note
    for limit, reached in (("1", True), ("2", True), ("3", False)):  # 2 jobs in the store
        assert (
            json.loads(fast_run(coordinator, "history", "--json", "--limit", limit).stdout)["limit_reached"] is reached
        )
    assert [j["name"] for j in json.loads(fast_run(coordinator, "history", "--json").stdout)["jobs"]] == [
        "hist",
        "waits",
    ]
    for args in (["queues"], ["history"], ["history", "-s", "pending", "--since", "1h"]):
        status, heavy, out = run_fast(coordinator, *args)
        assert (status, heavy) == (0, []), args
        assert out.startswith(("QUEUE", "JOBID")), out


def follow_run(state_dir: str, command: list[str]) -> tuple[int, str, str, str]:
    """Start ``labgang run`` (``command``: the interpreter's argv), wait until it reports the job
    pending, cancel the job, and return (exit status, job id, stdout, stderr)."""
    env = {**os.environ, "LABGANG_STATE_DIR": state_dir}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    seen = ""
    while " pending in queue " not in seen:
        line = proc.stderr.readline()
        assert line, f"run ended before its job was reported pending: {seen}"
        seen += line
    job_id = seen.split("labgang: submitted job ", 1)[1].split()[0]
    assert fast_run(state_dir, "cancel", job_id).returncode == 0
    out, err = proc.communicate(timeout=60)
    return proc.returncode, job_id, out, seen + err


@pytest.mark.slow
def test_run_through_the_fast_path_follows_the_job_as_the_click_command(coordinator):
    args = ["run", "--name", "followed", "--", "true"]
    report = f"print('REPORT', sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    fast_code = (
        f"import atexit, sys\natexit.register(lambda: {report})\nsys.argv = ['labgang', *{args!r}]\n"
        "from labgang.launcher.cli import quick\nquick.main()\n"
    )
    slow_code = f"import sys\nsys.argv = ['labgang', *{args!r}]\nfrom labgang.launcher.cli.main import main\nmain()\n"
    fast_status, fast_id, fast_out, fast_err = follow_run(coordinator, [sys.executable, "-c", fast_code])
    slow_status, slow_id, slow_out, slow_err = follow_run(coordinator, [sys.executable, "-c", slow_code])
    fast_err, heavy = fast_err.rsplit("REPORT ", 1)
    assert eval(heavy) == []  # noqa: S307 - our own repr of a list of module names
    assert fast_status == slow_status == 1  # a cancelled job
    assert fast_out == slow_out == ""
    assert fast_err.replace(f"job {fast_id}", "job N") == slow_err.replace(f"job {slow_id}", "job N")
    assert f"labgang: job {fast_id} cancelled" in fast_err


@pytest.mark.slow
def test_a_closed_stdout_ends_both_paths_quietly_with_status_1(coordinator):
    """``labgang queue | head``: the reader went away; no traceback, exit status 1, as click does."""
    run_fast(coordinator, "submit", "--", "true")
    results = []
    for run in (fast_run, click_run):
        read_end, write_end = os.pipe()
        os.close(read_end)  # nobody reads: the first write fails with EPIPE
        env = {**os.environ, "LABGANG_STATE_DIR": coordinator}
        argv = [sys.executable, "-m", "labgang.launcher"] if run is fast_run else [sys.executable, "-c", CLICK_MAIN]
        done = subprocess.run([*argv, "queue"], stdout=write_end, stderr=subprocess.PIPE, text=True, env=env)
        os.close(write_end)
        results.append((done.returncode, done.stderr))
    assert results[0] == results[1] == (1, "")
