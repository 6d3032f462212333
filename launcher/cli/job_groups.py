"""A job of groups on the command line (``docs/job-groups.md``): Slurm's ``:`` between components
and ``labgang submit -f job.toml``, turned into the submission body's ``groups`` list.

``labgang submit -n 1 -g 0 -- mpirun.sh : -n 4 -g 2 -- python worker.py``: the options before the
first ``--`` are the first group's (with the job's own options), each ``:`` followed by an option
or ``--`` starts another group, which takes the per-rank options only (:data:`GROUP_FLAGS`) and
then its command after ``--``. A ``:`` not followed by an option or ``--`` is an argument of the
command. A group is named ``g0``, ``g1``, … by position, or ``--group NAME``.

The job file (TOML) has one ``[[group]]`` table per group (:func:`groups_from_file`).

Click-free and imported only for such a submission (docs/cli-startup.md).
"""

from __future__ import annotations

from labgang.launcher.cli.job_request import SubmissionError
from labgang.launcher.cli.quick_argv import NotFast, parse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def _count(low: int) -> Callable[[str], int]:
    """A converter of a whole number >= ``low`` (ValueError otherwise)."""

    def convert(text: str) -> int:
        value = int(text)
        if value < low:
            raise ValueError(text)
        return value

    return convert


def _topology(text: str) -> str:
    from labgang.launcher.model import TOPOLOGY_LEVELS

    if text not in TOPOLOGY_LEVELS:
        raise ValueError(text)
    return text


GROUP_FLAGS: dict[str, tuple[str, Any]] = {
    "-n": ("workers", _count(1)),
    "--workers": ("workers", _count(1)),
    "--ntasks": ("workers", _count(1)),
    "-g": ("gpus_per_worker", _count(0)),
    "--gpus-per-worker": ("gpus_per_worker", _count(0)),
    "--gpus-per-task": ("gpus_per_worker", _count(0)),
    "--mig": ("mig", str),
    "-N": ("nodes", _count(1)),
    "--nodes": ("nodes", _count(1)),
    "--gpu-model": ("gpu_model", str),
    "--min-workers": ("min_workers", _count(1)),
    "-c": ("cpus_per_task", _count(1)),
    "--cpus-per-task": ("cpus_per_task", _count(1)),
    "--mem": ("mem", str),
    "--mem-per-gpu": ("mem_per_gpu", str),
    "--topology": ("topology", _topology),
    "--group": ("name", str),
}
"""The options a group after ``:`` takes: the per-rank shape, and ``--group NAME``."""

_ALLOWED = (
    "-n, -g (0 allowed), --mig, -N/--nodes, --gpu-model, --min-workers, -c, --mem, --mem-per-gpu, --topology, --group"
)


def split_components(argv: list[str]) -> list[list[str]]:
    """The command line after the first group's options, cut at each ``:`` that starts a group
    (one followed by an option or ``--``); one element when there is none."""
    parts: list[list[str]] = [[]]
    for i, word in enumerate(argv):
        following = argv[i + 1] if i + 1 < len(argv) else None
        if word == ":" and following is not None and following.startswith("-") and following != "-":
            parts.append([])
        else:
            parts[-1].append(word)
    return parts


def group_entry(shape: dict[str, Any], argv: list[str], where: str, *, in_file: bool = False) -> dict[str, Any]:
    """One ``groups`` element of the body from a group's options (CLI names) and command.

    Args:
        in_file: the group is a job file's ``[[group]]`` table: its problems name the table's keys
            (``group[1].resources.mem``), not the flags.

    Raises:
        SubmissionError: a bad size, both ``-g`` and ``--mig``, or no command (names the group).
    """
    from labgang.launcher.cli.job_request import host_request

    if not argv:
        missing = "command: give the group's command" if in_file else "missing CMD: give the group's command after --"
        raise SubmissionError(f"{where}: {missing}")
    if shape.get("mig") is not None and shape.get("gpus_per_worker") is not None:
        both = "resources.gpus and resources.mig" if in_file else "-g and --mig"
        raise SubmissionError(f"{where}: {both} exclude each other: a rank gets full GPUs or one MIG device")
    entry: dict[str, Any] = {"workers": shape.get("workers") or 1, "argv": argv}
    for key in ("name", "gpus_per_worker", "mig", "nodes", "gpu_model", "topology", "min_workers"):
        if shape.get(key) is not None:
            entry[key] = shape[key]
    if isinstance(entry.get("mig"), str) and entry["mig"].startswith("mig-"):
        entry["mig"] = entry["mig"][4:]
    try:
        host = host_request(shape.get("cpus_per_task"), shape.get("mem"), shape.get("mem_per_gpu"), False)
    except SubmissionError as exc:
        text = str(exc)
        if in_file:  # the flags host_request names, as the table's keys (the longer flag first)
            text = text.replace("--mem-per-gpu", "resources.mem_per_gpu").replace("--mem", "resources.mem")
            key, colon, _ = text.partition(": ")
            if colon and key.startswith("resources.") and " " not in key:  # "group[1].resources.mem: ..."
                raise SubmissionError(f"{where}.{text}") from None
        raise SubmissionError(f"{where}: {text}") from None
    entry.update(host)
    if "env" in shape:
        entry["env"] = shape["env"]
    return entry


def groups_from_argv(first_shape: dict[str, Any], argv: list[str]) -> list[dict[str, Any]] | None:
    """The ``groups`` of ``CMD : OPTIONS -- CMD ...``, or None when ``argv`` has no group separator.

    Args:
        first_shape: the first group's options as ``build_submission`` got them.
        argv: everything after the first ``--``.

    Raises:
        SubmissionError: an option a group does not take, a bad value, a group without command.
    """
    parts = split_components(argv)
    if len(parts) == 1:
        return None
    groups = [group_entry(first_shape, parts[0], "group 0 (before the first ':')")]
    for k, words in enumerate(parts[1:], start=1):
        where = f"group {k} (after ':' number {k})"
        try:
            options, command = parse(words, GROUP_FLAGS, interspersed=False)
        except NotFast as exc:
            raise SubmissionError(_option_problem(words, str(exc), k)) from None
        groups.append(group_entry(options, command, where))
    return groups


_VALUE_ALLOWED = {
    "workers": "a whole number >= 1",
    "gpus_per_worker": "a whole number >= 0 (0: ranks with no device)",
    "nodes": "a whole number >= 1",
    "min_workers": "a whole number >= 1, at most the group's -n",
    "cpus_per_task": "a whole number >= 1",
}
"""What a group option's value allows, by destination, where :func:`_option_problem` says it."""
_SPELLED = {
    "workers": "-n/--workers",
    "gpus_per_worker": "-g/--gpus-per-worker",
    "nodes": "-N/--nodes",
    "cpus_per_task": "-c/--cpus-per-task",
}
"""How an error names a group option with a short and a long spelling (as ``submit --help`` does)."""


def _option_problem(words: list[str], arg: str, k: int) -> str:
    """The one line for an option ``arg`` of group ``k`` (``words``: its options and command) that
    :func:`~labgang.launcher.cli.quick_argv.parse` refused: a bad or missing value names the group
    (``--group NAME`` when given, else ``g<k>``), the option and what it allows; an option a group
    does not take lists those it takes."""
    from labgang.launcher.model import TOPOLOGY_LEVELS

    flag, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
    if flag not in GROUP_FLAGS and not arg.startswith("--") and arg[:2] in GROUP_FLAGS:
        flag, eq, inline = arg[:2], "=", arg[2:]  # -n0
    if flag not in GROUP_FLAGS:
        return f"group {k} (after ':' number {k}): {arg} is not an option a group takes; allowed: {_ALLOWED}"
    name = f"g{k}"
    options = words[: words.index("--")] if "--" in words else words
    for i, word in enumerate(options):
        if word == "--group" and i + 1 < len(options):
            name = options[i + 1]
        elif word.startswith("--group="):
            name = word.partition("=")[2]
    dest = GROUP_FLAGS[flag][0]
    shown = _SPELLED.get(dest, flag)
    allowed = _VALUE_ALLOWED.get(dest, ", ".join(TOPOLOGY_LEVELS) if dest == "topology" else "a value")
    if eq:
        value: str | None = inline
    else:
        at = words.index(arg) if arg in words else -1
        value = words[at + 1] if 0 <= at < len(words) - 1 else None
    if value is None:
        return f"group {name}: {shown}: needs a value; allowed: {allowed}"
    return f"group {name}: {shown}: {value} is not allowed; allowed: {allowed}"


_FILE_KEYS = ("name", "ranks", "command", "env", "resources")
_RESOURCE_KEYS = ("gpus", "mig", "gpu_model", "nodes", "topology", "min_ranks", "cpus", "mem", "mem_per_gpu")
POLICY_KEYS = ("success_policy", "failure_policy", "max_restarts", "startup_order")
"""The job file's top-level lifecycle policy keys (docs/group-lifecycle.md), the body fields of the same names."""
_TOP_KEYS = ("group", "colocate", *POLICY_KEYS)
_SHELL_OPERATORS = frozenset({"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1"})
"""Words of a job file's command string that mean a shell line: no shell runs it, so it is refused,
naming the list form that gives one."""


def groups_from_file(path: str) -> tuple[list[dict[str, Any]], list[list[str]]]:
    """The ``groups`` and ``colocate`` of a job file (docs/job-groups.md)::

        colocate = [["leader", "worker"]]     # optional
        [[group]]
        name = "leader"
        ranks = 1
        command = ["python", "leader.py"]   # or one string, split as a shell would
        env = { ROLE = "leader" }
        resources = { gpus = 1, cpus = 4, mem = "16G" }

    Raises:
        SubmissionError: an unreadable file, or a key that is unknown or has a bad value
            (one line naming ``group[1].resources.gpus`` and what it allows).
    """
    import shlex
    import tomllib

    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise SubmissionError(f"-f {path}: cannot read it: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SubmissionError(f"-f {path}: not valid TOML: {exc}") from None
    for key in data:
        if key not in _TOP_KEYS:
            raise SubmissionError(f"-f {path}: unknown key {key!r}; allowed: {', '.join(_TOP_KEYS)}")
    tables = data.get("group")
    if not isinstance(tables, list) or len(tables) < 2 or not all(isinstance(t, dict) for t in tables):
        raise SubmissionError(f"-f {path}: group: give two or more [[group]] tables (one group: use plain submit)")
    groups = []
    for i, table in enumerate(tables):
        where = f"-f {path}: group[{i}]"
        for key in table:
            if key not in _FILE_KEYS:
                raise SubmissionError(f"{where}: unknown key {key!r}; allowed: {', '.join(_FILE_KEYS)}")
        shape: dict[str, Any] = {}
        if "name" in table:
            shape["name"] = _text(table["name"], f"{where}.name")
        if "ranks" in table:
            shape["workers"] = _whole(table["ranks"], f"{where}.ranks", 1)
        command = table.get("command")
        if isinstance(command, str):
            try:
                argv = shlex.split(command)
            except ValueError as exc:  # an unclosed quote
                raise SubmissionError(f"{where}.command: {str(exc).lower()} in {command!r}") from None
            operators = [w for w in argv if w in _SHELL_OPERATORS]
            if operators:
                raise SubmissionError(
                    f"{where}.command: {operators[0]!r} would reach the program as a word: no shell runs a "
                    f'command string; for a shell line give command = ["sh", "-c", {command!r}]'
                )
        elif isinstance(command, list) and all(isinstance(w, str) for w in command):
            argv = list(command)
        else:
            raise SubmissionError(f"{where}.command: give the group's command, a list of words or one string")
        env = table.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise SubmissionError(f'{where}.env: must be a table of strings (NAME = "value")')
        if env:
            shape["env"] = env
        resources = table.get("resources", {})
        if not isinstance(resources, dict):
            raise SubmissionError(f"{where}.resources: must be a table; allowed keys: {', '.join(_RESOURCE_KEYS)}")
        for key, value in resources.items():
            at = f"{where}.resources.{key}"
            if key == "gpus":
                shape["gpus_per_worker"] = _whole(value, at, 0)
            elif key in ("nodes", "min_ranks", "cpus"):
                dest = {"nodes": "nodes", "min_ranks": "min_workers", "cpus": "cpus_per_task"}[key]
                shape[dest] = _whole(value, at, 1)
            elif key in ("mig", "gpu_model", "mem", "mem_per_gpu"):
                shape[key] = _text(value, at)
            elif key == "topology":
                try:
                    shape["topology"] = _topology(_text(value, at))
                except ValueError:
                    from labgang.launcher.model import TOPOLOGY_LEVELS

                    raise SubmissionError(f"{at}: {value!r}; allowed: {', '.join(TOPOLOGY_LEVELS)}") from None
            else:
                raise SubmissionError(f"{where}.resources: unknown key {key!r}; allowed: {', '.join(_RESOURCE_KEYS)}")
        groups.append(group_entry(shape, argv, where, in_file=True))
    colocate = data.get("colocate", [])
    if not isinstance(colocate, list) or not all(
        isinstance(c, list) and all(isinstance(n, str) for n in c) for c in colocate
    ):
        raise SubmissionError(f'-f {path}: colocate: must be a list of lists of group names, e.g. [["a", "b"]]')
    return groups, colocate


FILE_KEYS = {
    "name": "name",
    "workers": "ranks",
    "argv": "command",
    "env": "env",
    "gpus_per_worker": "resources.gpus",
    "mig": "resources.mig",
    "gpu_model": "resources.gpu_model",
    "nodes": "resources.nodes",
    "topology": "resources.topology",
    "min_workers": "resources.min_ranks",
    "cpus_per_task": "resources.cpus",
    "mem": "resources.mem",
    "mem_per_gpu": "resources.mem_per_gpu",
}
"""A group's body field → its key in a ``[[group]]`` table of the job file."""

_FILE_WORDS = {"gpus_per_worker": "gpus", "min_workers": "min_ranks", "cpus_per_task": "cpus"}
"""Body field names a refusal's text may use that the job file spells otherwise."""


def file_refusal(path: str, field: str | None, message: str, allowed: Any, flags: dict[str, Any]) -> str | None:
    """A coordinator refusal of a ``-f`` submission worded in the job file's terms, or None when it is
    not about something the file gave (then the flags' wording stands).

    ``groups.1.topology: ...`` becomes ``-f job.toml: group[1].resources.topology: ...`` (and the
    body's ``gpus_per_worker`` in its text the file's ``gpus``); a top-level policy the file gave
    (``success_policy``...) or ``colocate``, not given by its flag too, keeps its key.

    Args:
        path: the ``-f`` file. field, message, allowed: the refusal's (``ApiError``).
        flags: the submission's options (body field → value; a policy given as a flag wins).
    """
    import re

    group = re.match(r"groups\.(\d+)\.(\w+)", field or "")
    if group is not None:
        index, key = group.groups()
        where = f"group[{index}].{FILE_KEYS.get(key, key)}"
        text = re.sub(r"^groups\.\d+\.\w+(\.\d+)?: ", "", message)
    elif field == "groups" or (field in (*POLICY_KEYS, "colocate") and flags.get(field) is None):
        where = "group" if field == "groups" else str(field)
        text = message.removeprefix(f"{field}: ")
    else:
        return None
    text = re.sub(r"\b(" + "|".join(_FILE_WORDS) + r")\b", lambda m: _FILE_WORDS[m.group(1)], text)
    if allowed not in (None, "", [], {}):
        items = [str(item) for item in (allowed if isinstance(allowed, (list, tuple)) else [allowed])]
        if not all(item in text for item in items):
            text = f"{text} (allowed: {', '.join(items)})"
    return f"-f {path}: {where}: {text}"


def _whole(value: object, where: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise SubmissionError(f"{where}: {value!r}; allowed: a whole number >= {low}")
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SubmissionError(f"{where}: {value!r}; allowed: a non-empty string")
    return value


def colocate_sets(text: str) -> list[list[str]]:
    """``--colocate g0,g1`` (one set; ``;`` between several sets: ``a,b;c,d``).

    Raises:
        SubmissionError: a set naming fewer than two groups.
    """
    sets = [[n.strip() for n in part.split(",") if n.strip()] for part in text.split(";")]
    for s in sets:
        if len(s) < 2:
            raise SubmissionError(f"--colocate: {text!r}; allowed: two or more group names, comma-separated (g0,g1)")
    return sets


def policies_from_file(path: str) -> dict[str, Any]:
    """The lifecycle policies a job file gives at its top level, as body fields (only those it has)::

        success_policy = "group:launcher"
        failure_policy = "restart"
        max_restarts = 3
        startup_order = ["launcher", "workers"]   # or "launcher,workers"

    The coordinator checks the values against the job's groups (``launcher/lifecycle/group_policy.py``).
    Call after :func:`groups_from_file` accepted the file.

    Raises:
        SubmissionError: a value of the wrong kind (one line naming the key and what it allows).
    """
    import tomllib

    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    out: dict[str, Any] = {}
    for key in ("success_policy", "failure_policy"):
        if key in data:
            out[key] = _text(data[key], f"-f {path}: {key}")
    if "max_restarts" in data:
        out["max_restarts"] = _whole(data["max_restarts"], f"-f {path}: max_restarts", 0)
    order = data.get("startup_order")
    if isinstance(order, str):
        order = [name.strip() for name in order.split(",")]
    if order is not None:
        if not isinstance(order, list) or not all(isinstance(n, str) and n.strip() for n in order):
            raise SubmissionError(
                f"-f {path}: startup_order: {data['startup_order']!r}; allowed: a list of group names, "
                'e.g. ["launcher", "workers"]'
            )
        out["startup_order"] = order
    return out
