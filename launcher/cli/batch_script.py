"""``labgang submit SCRIPT``: a batch script's ``#LABGANG`` and ``#SBATCH`` lines as submit flags
(docs/slurm.md).

``labgang submit train.sbatch [ARGS...]`` (a file as the first positional argument, no ``--`` before
it; the words after it are the script's arguments, as ``sbatch script [args...]``) runs the
script with ``bash``, or with the interpreter its ``#!`` line names, and reads the directives at
its top, as ``sbatch`` does: the lines from the first up to the first line that is neither blank
nor a comment. ``#LABGANG`` lines hold labgang's own submit flags (``#LABGANG -n 4 -g 2``);
``#SBATCH`` lines hold Slurm's, translated (:data:`SBATCH_OPTIONS`). A text after ``#`` on a
directive line is a comment. The directives become flags placed before the command line's own,
so the command line wins (the last of a repeated flag counts), and ``#LABGANG`` lines win over
``#SBATCH`` ones. An ``#SBATCH`` option labgang lacks gets one warning line naming it and is
ignored, or, with ``--error-on-unknown-sbatch``, refuses the submission.

Stdlib only, no click: the fast path of ``submit`` (:mod:`labgang.launcher.cli.quick`) and the
click command (:mod:`labgang.launcher.cli.submission`) both call :func:`script_form`.
"""

from __future__ import annotations

import os

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


class BadScript(ValueError):
    """A batch script that cannot be read, or a directive that cannot be used; the message
    names the file, the line and what is allowed."""


IGNORED_SBATCH: dict[str, str] = {
    "--mem-per-cpu": "labgang counts memory per node (--mem) or per GPU (--mem-per-gpu), not per CPU",
}
"""``#SBATCH`` options labgang reads but cannot honour yet: each gets a warning naming it and why
(``--error-on-unknown-sbatch`` does not refuse them: they are known, only not counted)."""

_FLAG_ONLY = frozenset({"--exclusive", "--requeue", "--no-requeue", "-H", "--hold", "--wait", "-W", "--parsable"})
"""``#SBATCH`` options that take no value (the others take one: ``-N 2``, ``--nodes=2``)."""


def _gres(value: str) -> list[str]:
    """``--gres=gpu:2`` or ``gpu:a100:2`` -> ``-g 2`` (``--gpu-model a100``); ``shard:N`` -> ``--shards N``,
    ``mps:PCT`` -> ``--mps PCT`` (Slurm's sharing GRES; docs/sharing.md). The GPU count is per node here;
    :func:`sbatch_flags` divides it among the node's tasks (:func:`_gres_per_rank`)."""
    out: list[str] = []
    for item in value.split(","):
        kind, _, rest = item.partition(":")
        if kind in ("shard", "mps"):
            if not rest.isdigit():
                raise ValueError(f"{item!r}: allowed: {kind}:N with a whole number N")
            out += ["--shards" if kind == "shard" else "--mps", rest]
            continue
        if kind != "gpu":
            raise ValueError(f"{item!r}: labgang counts only GPUs (gpu:N or gpu:MODEL:N) and shares (shard:N, mps:PCT)")
        model, _, count = rest.rpartition(":")
        if not count.isdigit():
            if not rest or (model == "" and not count):
                count, model = "1", ""
            else:
                model, count = rest, "1"
        out += ["-g", count] + (["--gpu-model", model] if model else [])
    return out


def _signal(value: str) -> list[str]:
    """Slurm's ``--signal=[{R|B}:]SIG[@SECONDS]`` (60 s by default) -> ``--signal [B:]SIG@SECONDS``
    (``B:`` kept: the signal goes to the script's shell alone)."""
    whom, text = (value[:2], value[2:]) if value[:2] in ("B:", "R:") else ("", value)
    return ["--signal", ("B:" if whom == "B:" else "") + (text if "@" in text else f"{text}@60")]


def _same(flag: str) -> Callable[[str], list[str]]:
    return lambda value: [flag, value]


SBATCH_OPTIONS: dict[str, Callable[[str], list[str]]] = {
    "-N": _same("--nodes"),
    "--nodes": _same("--nodes"),
    "-n": _same("--workers"),
    "--ntasks": _same("--workers"),
    "--gres": _gres,
    "--gpus-per-task": _same("--gpus-per-worker"),
    "-t": _same("--time"),
    "--time": _same("--time"),
    "-J": _same("--name"),
    "--job-name": _same("--name"),
    "-p": _same("--queue"),
    "--partition": _same("--queue"),
    "--qos": _same("--priority"),
    "-a": _same("--array"),
    "--array": _same("--array"),
    "-d": _same("--dependency"),
    "--dependency": _same("--dependency"),
    "--signal": _signal,
    "-b": _same("--begin"),
    "-o": _same("--output"),
    "--output": _same("--output"),
    "-e": _same("--error"),
    "--error": _same("--error"),
    "--begin": _same("--begin"),
    "--no-requeue": lambda _: ["--no-requeue"],
    "--requeue": lambda _: ["--requeue"],  # the default of submit; run needs it to be requeued
    "-H": lambda _: ["--hold"],
    "--hold": lambda _: ["--hold"],
    "--mail-type": _same("--mail-type"),
    "--mail-user": _same("--mail-user"),
    "-c": _same("--cpus-per-task"),
    "--cpus-per-task": _same("--cpus-per-task"),
    "--mem": _same("--mem"),
    "--mem-per-gpu": _same("--mem-per-gpu"),
    "--gpu-mem": _same("--gpu-mem"),
    "--exclusive": lambda _: ["--exclusive"],
    "-D": _same("--chdir"),
    "--chdir": _same("--chdir"),
}
"""``#SBATCH`` options labgang has, each to the labgang flags it becomes (``--ntasks-per-node``
is read apart: it multiplies by the node count)."""


def directive_lines(text: str) -> list[tuple[int, str, str]]:
    """The directives at the top of a script: ``(line number, "#SBATCH" or "#LABGANG", the rest)``,
    up to the first line that is neither blank nor a comment (the ``#!`` line is a comment)."""
    out: list[tuple[int, str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        for prefix in ("#SBATCH", "#LABGANG"):
            if stripped.startswith(prefix) and stripped[len(prefix) : len(prefix) + 1] in ("", " ", "\t"):
                out.append((number, prefix, stripped[len(prefix) :]))
    return out


def _words(rest: str, where: str) -> list[str]:
    import shlex

    try:
        return shlex.split(rest, comments=True)
    except ValueError as exc:
        raise BadScript(f"{where}: {exc} (quote values as a shell would)") from None


def _split_sbatch(words: list[str]) -> list[tuple[str, str | None]]:
    """``["-N", "2", "--gres=gpu:1", "-t10"]`` -> ``[("-N", "2"), ("--gres", "gpu:1"), ("-t", "10")]``."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if eq:
                out.append((name, value))
                continue
        elif word.startswith("-") and len(word) > 2:
            out.append((word[:2], word[2:]))
            continue
        else:
            name = word
        if name in _FLAG_ONLY or i >= len(words) or (words[i].startswith("-") and name not in SBATCH_OPTIONS):
            out.append((name, None))
        else:
            out.append((name, words[i]))
            i += 1
    return out


def sbatch_flags(lines: list[tuple[int, str, str]], path: str, *, strict: bool) -> tuple[list[str], list[str]]:
    """The labgang flags of the ``#SBATCH`` lines, and one warning per option labgang ignores.

    Args:
        lines: :func:`directive_lines` output (``#LABGANG`` lines are skipped here).
        path: the script's name as given, for messages.
        strict: ``--error-on-unknown-sbatch``: an option labgang lacks refuses the script.

    Raises:
        BadScript: a value labgang cannot translate, or (``strict``) an option it lacks.
    """
    flags: list[str] = []
    warnings: list[str] = []
    per_node: str | None = None
    per_node_at = path  # the line of --ntasks-per-node, for its refusal
    nodes: str | None = None
    tasks_given = False
    tasks: str | None = None
    gpus: tuple[str, str] | None = None
    gres: tuple[str, str, int] | None = None  # (where, value, index of the -g count in flags): per node
    for number, prefix, rest in lines:
        if prefix != "#SBATCH":
            continue
        where = f"{path}:{number}"
        for name, value in _split_sbatch(_words(rest, where)):
            shown = name if value is None else f"{name} {value}"
            if name == "-G":  # Slurm's short form of --gpus
                name = "--gpus"
            elif name == "--gpus-per-node" and value is not None:  # Slurm's --gres=gpu:[TYPE:]N, per node
                name, value = "--gres", f"gpu:{value}"
            if name in ("hetjob", "packjob"):
                raise BadScript(
                    f"{where}: #SBATCH {name}: labgang does not read a heterogeneous job from a script; "
                    "allowed: one component (give a job of groups as CMD : OPTIONS -- CMD or -f job.toml)"
                )
            if name == "--ntasks-per-node" and value is not None:
                per_node, per_node_at = value, where
            elif name == "--gpus" and value is not None:
                gpus = (where, value)
            elif name in SBATCH_OPTIONS and (value is not None or name in _FLAG_ONLY):
                try:
                    added = SBATCH_OPTIONS[name](value or "")
                except ValueError as exc:
                    raise BadScript(f"{where}: #SBATCH {shown}: {exc}") from None
                if name == "--gres" and "-g" in added:
                    gres = (where, shown, len(flags) + added.index("-g") + 1)
                flags += added
                tasks_given = tasks_given or name in ("-n", "--ntasks")
                if name in ("-n", "--ntasks"):
                    tasks = value
                if name in ("-N", "--nodes"):
                    nodes = value
            elif name in IGNORED_SBATCH:
                warnings.append(f"{where}: #SBATCH {name} is ignored: {IGNORED_SBATCH[name]}")
            elif strict:
                raise BadScript(
                    f"{where}: #SBATCH {name}: labgang has no such option (--error-on-unknown-sbatch); "
                    "see docs/slurm.md for the #SBATCH options labgang reads"
                )
            else:
                warnings.append(f"{where}: #SBATCH {name} is ignored: labgang has no such option")
    if gpus is not None:  # Slurm's --gpus: total GPUs of the job, shared evenly by its ranks here
        at, value = gpus
        count = value.rpartition(":")[2]
        if not count.isdigit() or int(count) < 1:
            raise BadScript(f"{at}: #SBATCH --gpus {value}: allowed: N or TYPE:N, N a whole number >= 1")
        if gres is not None:
            _gpus_agree_with_gres(at, value, gres, flags[gres[2]], nodes)  # then --gres says it all
        else:
            flags += _gpus_per_rank(at, value, _task_count(tasks, per_node, nodes), flags)
    if per_node is not None and not tasks_given:
        if not per_node.isdigit():
            raise BadScript(
                f"{per_node_at}: #SBATCH --ntasks-per-node {per_node}: allowed: a whole number of tasks per node, "
                "with -N N"
            )
        if nodes is None or nodes.isdigit():  # else -N's own refusal names its line (ScriptCommand)
            flags += ["--workers", str(int(per_node) * int(nodes or 1))]
    elif nodes is not None and nodes.isdigit() and not tasks_given:
        flags += ["--workers", nodes]  # Slurm: -N N without -n or --ntasks-per-node is one task per node
    if gres is not None:
        flags[gres[2]] = _gres_per_rank(gres, flags[gres[2]], None if tasks_given else per_node, tasks, nodes)
    return flags, warnings


def _task_count(tasks: str | None, per_node: str | None, nodes: str | None) -> int:
    """The job's tasks as Slurm counts them from ``-n``, else ``--ntasks-per-node`` × ``-N``, else ``-N``
    (one task a node), else 1; a value that is no whole number counts 1 (its own line refuses it)."""
    on_nodes = int(nodes) if nodes is not None and nodes.isdigit() else 1
    if tasks is not None and tasks.isdigit():
        return int(tasks)
    if per_node is not None and per_node.isdigit():
        return int(per_node) * on_nodes
    return on_nodes


def _gpus_per_rank(at: str, value: str, ranks: int, flags: list[str]) -> list[str]:
    """The flags for Slurm's ``--gpus [TYPE:]N`` (``-G``), the job's total GPUs, over its ``ranks`` tasks:
    ``-g N/ranks`` (``--gpu-model TYPE``), labgang asking GPUs per rank. Beside ``--gpus-per-task M`` the
    total must be ``M × ranks`` (then nothing is added: the per-task line says it).

    Raises:
        BadScript: N does not divide evenly among the tasks, or differs from ``--gpus-per-task``'s total.
    """
    model, _, count = value.rpartition(":")
    total = int(count)
    if "--gpus-per-worker" in flags:
        each = flags[max(i for i, flag in enumerate(flags) if flag == "--gpus-per-worker") + 1]
        if each.isdigit() and int(each) * ranks == total:
            return ["--gpu-model", model] if model else []
        raise BadScript(
            f"{at}: #SBATCH --gpus {value}: conflicts with --gpus-per-task {each} ({ranks} task(s) of {each} GPUs "
            f"is not {total}); allowed: one of the two, or a --gpus total equal to --gpus-per-task times the tasks"
        )
    if total % ranks:
        raise BadScript(
            f"{at}: #SBATCH --gpus {value}: {total} GPUs do not divide evenly among the job's {ranks} tasks "
            "(labgang gives each rank the same GPUs); allowed: a multiple of the tasks, or --gpus-per-task N"
        )
    return ["-g", str(total // ranks)] + (["--gpu-model", model] if model else [])


def _gpus_agree_with_gres(at: str, value: str, gres: tuple[str, str, int], per_node: str, nodes: str | None) -> None:
    """``#SBATCH --gpus`` (the job's total) beside ``--gres=gpu:N`` (per node): as Slurm, which refuses a
    total that is not N times the node count ("--gpus is not multiple of --gres=gpu"), labgang takes both
    only when they say the same, and refuses them otherwise, in one line naming both lines: neither
    silently wins. Without ``-N`` the node count is 1 (Slurm would infer total/N nodes; the line says
    to write ``-N`` instead).

    Args:
        at, value: the ``--gpus`` line (``train.sh:4``) and its value (``3`` or ``a100:3``).
        gres: the ``--gres`` line, its option as written and the index of its count in the flags.
        per_node: N, the GPUs per node the ``--gres`` line asks for. nodes: ``-N``'s value, if any.

    Raises:
        BadScript: the total differs from N x nodes (or ``-N`` is no whole number).
    """
    on_nodes = int(nodes) if nodes is not None and nodes.isdigit() else 1
    total, each = int(value.rpartition(":")[2]), int(per_node)
    if total == each * on_nodes:
        return
    hint = "Slurm refuses this too"
    if nodes is None and each > 0 and total % each == 0:  # Slurm would infer -N total/N; labgang asks for it
        count = total // each
        hint = f"for {count} nodes of {each} GPUs write -N {count}, which Slurm infers and labgang does not"
    raise BadScript(
        f"{at}: #SBATCH --gpus {value}: conflicts with {gres[0]}: #SBATCH {gres[1]} ({each} GPUs per node "
        f"on {on_nodes} node{'s' if on_nodes != 1 else ''} is {each * on_nodes} GPUs, not {total}); "
        f"allowed: one of the two, or a --gpus total equal to --gres's count times -N ({hint})"
    )


def _gres_per_rank(
    gres: tuple[str, str, int], count: str, per_node: str | None, tasks: str | None, nodes: str | None
) -> str:
    """Slurm's ``--gres=gpu:N`` is N GPUs per node, shared by the node's tasks: the GPUs per rank
    (``-g``) are N over the tasks per node (``--ntasks-per-node``, or ``-n`` over ``-N``). Where the
    tasks per node are not given (``-n`` without ``-N``: labgang may put each rank on its own node),
    N stays per rank. A count that the tasks cannot share evenly refuses the script."""
    where, shown = gres[0], gres[1]
    total = int(count)
    if per_node is not None and per_node.isdigit() and int(per_node) > 0:
        ranks, what = int(per_node), f"--ntasks-per-node {per_node}"
        share = total % ranks == 0
        result = total // ranks if share else 0
    elif tasks is not None and tasks.isdigit() and int(tasks) > 0 and nodes is not None and nodes.isdigit():
        ranks, what = int(tasks), f"--ntasks {tasks} on --nodes {nodes}"
        on_nodes = max(int(nodes), 1)
        share = (total * on_nodes) % ranks == 0 and ranks % on_nodes == 0
        result = total * on_nodes // ranks if share else 0
    else:
        return count
    if not share or result < 1:
        raise BadScript(
            f"{where}: #SBATCH {shown}: {total} GPUs per node do not divide evenly among the tasks of a node "
            f"({what}); allowed: a multiple of the tasks per node, or --gpus-per-task N"
        )
    return str(result)


def directive_origins(path: str) -> dict[str, str]:
    """Which directive line of the script at ``path`` gave each labgang flag, so that a refused value
    names its line: ``{"--queue": "train.sh:3: #SBATCH --partition=gpu"}`` (the flag as
    :func:`sbatch_flags`/:func:`labgang_flags` write it; a later line wins, ``#LABGANG`` over ``#SBATCH``,
    as the flags do). Empty when the file cannot be read or a directive cannot be used."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = directive_lines(f.read())
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for wanted in ("#SBATCH", "#LABGANG"):
        for line in lines:
            number, prefix, rest = line
            if prefix != wanted:
                continue
            try:
                if prefix == "#SBATCH":
                    words = sbatch_flags([line], path, strict=False)[0]
                else:
                    words = labgang_flags([line], path)
            except BadScript:
                continue
            for word in words:
                if word.startswith("-"):
                    out[word] = f"{path}:{number}: {prefix} {rest.strip()}"
    return out


API_FIELD_DEST = {"cwd": "chdir", "signal": "signal_spec", "time_limit_s": "time_limit", "grace_s": "grace"}
"""The coordinator's field names (``ApiError.field``) that differ from the submit flags' destinations."""


def field_origins(path: str, table: Mapping[str, tuple[str, object]], given: Mapping[str, object]) -> dict[str, str]:
    """The directive line behind each submit field the script sets and the command line does not.

    Args:
        path: the batch script.
        table: the command's flag table (``quick._submit_flags()``: flag -> (destination, converter)).
        given: the command line's own options, parsed with ``table`` (they win over the script's).

    Returns:
        destination (``"queue"``) -> ``"train.sh:3: #SBATCH --partition=gpu"``.
    """
    out: dict[str, str] = {}
    for flag, where in directive_origins(path).items():
        entry = table.get(flag)
        if entry is not None and entry[0] not in given:
            out[entry[0]] = where
    return out


def origin_of(
    origins: Mapping[str, str], table: Mapping[str, tuple[str, object]], *, field: str | None = None, message: str = ""
) -> str | None:
    """The directive line behind a refusal, or None when it was no directive's: by the coordinator's
    ``field`` (``queue``), else by the flags a builder message starts with (``-D/--chdir: ...``), else
    by the first flag a directive set among those its first clause names (``--mem and --mem-per-gpu
    exclude each other``).
    A refusal of ``workers`` over the job's GPUs (``message`` names gpu) where an ``#SBATCH --gres``
    line gave the GPUs per rank names that line: it set the GPUs of each node.
    ``origins`` is :func:`field_origins`' answer, ``table`` the flag table it was made with."""
    if field is not None:
        name = field.split(".", 1)[0]
        dest = API_FIELD_DEST.get(name, name)
        gres = origins.get("gpus_per_worker")
        if dest == "workers" and " gpu" in message and gres is not None and _is_gres_line(gres):
            return gres  # the job's GPUs: --gres=gpu:N per node fixes them whatever the tasks per node
        return origins.get(dest)
    for flag in message.split(": ", 1)[0].split("/"):
        entry = table.get(flag)
        if entry is not None and entry[0] in origins:
            return origins[entry[0]]
    # a pair refused together ("--mem and --mem-per-gpu exclude each other"): the first one a directive set
    for word in message.split(";", 1)[0].split():
        entry = table.get(word.strip(",.()'"))
        if word.startswith("-") and entry is not None and entry[0] in origins:
            return origins[entry[0]]
    return None


def _is_gres_line(where: str) -> bool:
    """True when ``where`` (a :func:`directive_origins` value) is an ``#SBATCH`` line with ``--gres``."""
    _, sbatch, rest = where.partition(": #SBATCH ")
    return bool(sbatch) and any(word.startswith("--gres") for word in rest.split())


def labgang_flags(lines: list[tuple[int, str, str]], path: str) -> list[str]:
    """The flags of the ``#LABGANG`` lines, as written (labgang's own submit flags)."""
    out: list[str] = []
    for number, prefix, rest in lines:
        if prefix == "#LABGANG":
            words = _words(rest, f"{path}:{number}")
            if "--" in words:
                raise BadScript(f"{path}:{number}: #LABGANG takes flags only; the command is the script itself")
            out += words
    return out


def script_command(path: str, text: str) -> list[str]:
    """How the script runs: ``bash PATH``, or its ``#!`` interpreter with PATH (``#!/usr/bin/env python3``
    -> ``/usr/bin/env python3 PATH``). PATH is made absolute, so the ranks find it from the submit directory."""
    import shlex

    full = os.path.abspath(path)
    first = text.split("\n", 1)[0]
    if first.startswith("#!"):
        interpreter = shlex.split(first[2:], comments=False)
        if interpreter:
            return [*interpreter, full]
    return ["bash", full]


SRUN_SHIM_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "batch_bin")
"""The folder of labgang's ``srun`` for batch scripts (``launcher/data/batch_bin/srun``), put first on a
batch script's ``PATH`` (:func:`with_srun_shim`): the script runs on every rank, and ``srun CMD`` in it runs
CMD in that rank (``-n K``: ranks below K only), so over the job CMD runs once per rank, as Slurm's step
does, and never reaches a system Slurm (docs/slurm.md)."""


def with_srun_shim(env: dict[str, str]) -> dict[str, str]:
    """``env`` with :data:`SRUN_SHIM_DIR` first on its ``PATH`` (``os.defpath`` after it when ``env``
    has none), once."""
    rest = [part for part in env.get("PATH", "").split(os.pathsep) if part and part != SRUN_SHIM_DIR]
    if not rest:
        rest = os.defpath.split(os.pathsep)
    return {**env, "PATH": os.pathsep.join([SRUN_SHIM_DIR, *rest])}


SCRIPT_SUFFIXES = (".sh", ".sbatch", ".slurm", ".bash")
"""File name endings that make the first argument a batch script's path rather than a command's name."""


def looks_like_script(path: str) -> bool:
    """True when ``path``, the first argument of ``submit``/``run`` (no ``--`` before it), reads as a batch
    script's path: it ends in one of :data:`SCRIPT_SUFFIXES` or names a folder (holds a ``/``)."""
    return "/" in path or path.endswith(SCRIPT_SUFFIXES)


def missing_script(path: str) -> str | None:
    """The one-line refusal of a first argument that looks like a batch script (:func:`looks_like_script`)
    but is no file: ``labgang submit trian.sbatch`` must not submit ``trian.sbatch`` as a command that
    then fails to start. None when it is not such a path, or is a command on ``PATH`` (``run.sh`` there)."""
    if not looks_like_script(path) or os.path.isfile(path):
        return None
    if "/" not in path:
        import shutil

        if shutil.which(path) is not None:
            return None
    what = "a folder, not a file" if os.path.isdir(path) else "no such file"
    return (
        f"SCRIPT: {path!r} is {what}; a first argument ending .sh/.sbatch or holding a '/' is read as a batch "
        f"script (to run a command of that name, put it after --: labgang submit -- {path})"
    )


def script_form(args: list[str], positional: list[str], *, strict: bool) -> tuple[list[str], list[str]] | None:
    """The submit arguments with a batch script's directives in front, or None when ``args`` is
    not the script form: a text file's path as the first positional argument, no ``--`` before it,
    the words after it the script's own arguments (``sbatch script [args...]``). A program
    (``submit /bin/true``: a file with NUL bytes, or not UTF-8) is run as before, as the command,
    and so is the first command of a job of groups (``CMD : OPTIONS -- CMD``).

    Args:
        args: the arguments after ``submit``/``run``, as typed.
        positional: what the parser found after the options (the script path, then its arguments,
            for the script form).
        strict: ``--error-on-unknown-sbatch``.

    Returns:
        ``(new args, warnings)``: the new args are ``--name SCRIPT_NAME --batch-srun`` (labgang's
        ``srun`` first on the script's ``PATH``: :func:`with_srun_shim`), the ``#SBATCH`` flags,
        the ``#LABGANG`` flags, the command line's options, then ``-- INTERPRETER SCRIPT ARGS...``;
        each warning is one line without the command's prefix.

    Raises:
        BadScript: the file cannot be read, is ``-`` (standard input), is empty or has DOS line
            breaks (as sbatch refuses them), or a directive cannot be used.
    """
    options = len(args) - len(positional)  # the command line's own options come before the script
    if not positional or options < 0 or args[options:] != positional or "--" in args[:options]:
        return None
    if ":" in positional:
        from labgang.launcher.cli.job_groups import split_components

        if len(split_components(positional)) > 1:
            return None  # a job of groups: its first group's command, as typed
    path, script_args = positional[0], positional[1:]
    if path == "-":  # sbatch's script on standard input: the job runs its script from a file here
        raise BadScript(
            "-: labgang reads a batch script from a file, not from standard input (its ranks run the file "
            "itself); save it (e.g. job.sh) and submit that, or give a command after --"
        )
    if not os.path.isfile(path):
        missing = missing_script(path)
        if missing is not None:
            raise BadScript(missing)
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise BadScript(f"{path}: cannot read the batch script: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None  # a program, not a script
    if "\0" in text:
        return None
    if not text.strip():  # as sbatch: "Batch script is empty!"
        raise BadScript(f"{path}: the batch script is empty; allowed: a script with a command to run")
    if "\r\n" in text:  # as sbatch, which refuses DOS line breaks: the shell would read each \r as a character
        raise BadScript(
            f"{path}: the batch script has DOS line breaks (\\r\\n), which the shell reads as part of each "
            "command; convert it (dos2unix) and submit it again"
        )
    lines = directive_lines(text)
    sbatch, warnings = sbatch_flags(lines, path, strict=strict)
    own = labgang_flags(lines, path)
    name = ["--name", os.path.basename(path), "--batch-srun"]  # labgang's srun first on its PATH
    return [*name, *sbatch, *own, *args[:options], "--", *script_command(path, text), *script_args], warnings
