"""The ``POST /v1/jobs`` body from the submit flags, without click.

Shared by the click commands (:mod:`labgang.launcher.cli.jobs`) and the fast path of
``submit``/``run`` (:mod:`labgang.launcher.cli.quick`), so both send the same body.
"""

import os

# ``typing`` is for the type checker only: importing it costs a shell command ~2 ms
# (bench/cli_latency.py). Annotations that name what it imports are strings, and there is no
# ``from __future__ import annotations``: the module ``__future__`` costs a hot command 0.4M
# instructions (docs/cli-startup.md); tests/cli/test_quick.py checks that none loads it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

# Variables labgang sets for each rank; a value inherited from the submitting shell
# (say, from inside another job) must not leak into the new gang.
RANK_ENV = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "NODE_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "TORCHELASTIC_RUN_ID",
    }
)
# labgang's own settings (LABGANG_STATE_DIR...) configure this CLI, not the job; labgang sets
# LABGANG_JOB_ID and LABGANG_RESTART_COUNT for each rank itself.
LABGANG_ENV_PREFIX = "LABGANG_"


class SubmissionError(ValueError):
    """Conflicting or malformed submit flags; the message names the flag and what it allows."""


def current_umask() -> int:
    """This process's umask (``0`` to ``0o777``), read with ``os.umask`` and put back at once:
    what a submission carries so that the job's ranks create files as the submitter's shell would."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def build_submission(
    *,
    argv: "Iterable[str]",
    workers: int = 1,
    gpus_per_worker: "int | None" = None,
    mig: "str | None" = None,
    queue: "str | None" = None,
    priority: "str | None" = None,
    nodes: "int | None" = None,
    gpu_model: "str | None" = None,
    topology: "str | None" = None,
    cpu_bind: "str | None" = None,
    min_workers: "int | None" = None,
    grace: "float | None" = None,
    time_limit: "float | None" = None,
    name: "str | None" = None,
    no_requeue: bool = False,
    requeue: bool = False,
    signal_spec: "str | None" = None,
    dependency: "str | None" = None,
    env: "dict[str, str] | None" = None,
    cwd: "str | None" = None,
    chdir: "str | None" = None,
    batch_script: bool = False,
    array: "str | None" = None,
    begin_time: "float | None" = None,
    output: "str | None" = None,
    error: "str | None" = None,
    hold: bool = False,
    mail_type: "str | None" = None,
    mail_user: "str | None" = None,
    stdin_data: "bytes | None" = None,
    stdin_stream: bool = False,
    pty: bool = False,
    attached: bool = False,
    cpus_per_task: "int | None" = None,
    mem: "str | None" = None,
    mem_per_gpu: "str | None" = None,
    exclusive: bool = False,
    success_policy: "str | None" = None,
    failure_policy: "str | None" = None,
    max_restarts: "int | None" = None,
    startup_order: "str | None" = None,
    job_file: "str | None" = None,
    colocate: "str | None" = None,
    group_name: "str | None" = None,
    shards: "int | None" = None,
    mps: "int | None" = None,
    gpu_mem: "str | None" = None,
    wrap: "str | None" = None,
    umask: "int | None" = None,
) -> "dict[str, Any]":
    """Build the ``POST /v1/jobs`` body from the submit flags.

    Optional fields left unset are omitted so the coordinator applies its defaults
    (the user's default queue, the queue's grace...). The environment is the caller's
    (like ``sbatch --export=ALL``) minus the variables labgang sets per rank and
    ``LABGANG_*`` (this CLI's own settings).

    Args:
        argv: the command and its arguments (non-empty).
        workers: ranks in the gang (>= 1).
        gpus_per_worker: full GPUs per rank (>= 1); None means 1, or MIG with ``mig``.
        mig: a MIG profile such as ``"1g.10gb"`` (``"mig-1g.10gb"`` accepted).
        queue, priority, nodes, gpu_model, topology, cpu_bind, min_workers: as the flags.
        name: the job name; None lets the coordinator derive it from ``argv``.
        grace, time_limit: seconds.
        no_requeue: True to fail rather than requeue.
        requeue: ``--requeue`` given (``labgang run``'s jobs are not requeued without it; for
            ``submit`` it is the default); with ``no_requeue`` a :class:`SubmissionError`.
        signal_spec: canonical ``"SIGUSR1@60"``.
        dependency: Slurm's ``--dependency`` text, checked by the coordinator (docs/dependencies.md).
        env, cwd: defaults ``os.environ`` and ``os.getcwd()`` (the submit directory).
        chdir: ``-D/--chdir``, the ranks' working directory (Slurm's): absolute, or relative to ``cwd``;
            it must be an existing directory. It replaces ``cwd`` in the body, so ``--output``/``--error``
            paths are relative to it, as Slurm's are.
        batch_script: the command is a batch script (``submit SCRIPT``): labgang's ``srun`` goes first on
            its ``PATH`` (:func:`labgang.launcher.cli.batch_script.with_srun_shim`).
        output, error: ``--output``/``--error`` file name patterns (launcher/output_pattern.py),
            checked here for their escapes.
        begin_time: ``--begin``, unix seconds (the scheduler does not admit the job before it).
        array: a job array spec (``0-99``, ``1,3,5-9``, ``0-20:4``, ``%N`` cap; docs/arrays.md),
            checked here for its syntax; the coordinator checks it against ``limits.max_array_size``.
        hold: submit the job held (Slurm's ``-H``): pending until ``labgang release``.
        mail_type, mail_user: Slurm's ``--mail-type`` list (BEGIN, END, FAIL, REQUEUE, ALL, NONE;
            checked by the coordinator) and whom a mail goes to (``launcher/config/notify.py``).
        stdin_data: rank 0's whole standard input, or None (the API's ``stdin``; ``labgang run`` streams instead).
        stdin_stream: rank 0's standard input is streamed after the submission (``labgang run``'s,
            when it is a pipe or a file: ``launcher/stdin_forward.py``).
        pty: rank 0 on a pseudo-terminal (``labgang run --pty``, ``launcher/cli/pty_session.py``).
        attached: ``labgang run``'s job, followed by its ``run`` (with requeue off: its end names
            the gone client).
        cpus_per_task: host CPUs per rank (``-c``); mem, mem_per_gpu: ``--mem`` (per node) and
            ``--mem-per-gpu`` sizes as given (``agent/mem_size.py``); exclusive: whole nodes.
        success_policy, failure_policy, max_restarts: the lifecycle policies as given (``all``,
            ``any``, ``group:NAME``; ``fail``, ``restart``; 0..1000), checked by the coordinator
            against the job's groups (``launcher/lifecycle/group_policy.py``).
        startup_order: ``--startup-order``, group names separated by commas.
        job_file: ``-f job.toml``, a job of groups from a file; colocate: ``--colocate g0,g1``;
            group_name: ``--group NAME`` before the first ``--``, the first group's name.
            ``argv`` with ``:`` between groups (``CMD : -n 4 -g 2 -- CMD2``) is a job of groups
            too (:mod:`labgang.launcher.cli.job_groups`, docs/job-groups.md).
        shards, mps, gpu_mem: a share of one GPU (docs/sharing.md): ``--shards N``, ``--mps PCT`` and the
            ``--gpu-mem`` size as given; the coordinator checks them against ``[sharing]``.
        wrap: ``submit --wrap "CMD"`` (sbatch's): CMD as a one-line ``/bin/sh`` script, in place of
            ``argv`` (which must then be empty, as must ``job_file``); named ``wrap`` unless ``name``.
        umask: the ranks' umask; None = this process's (:func:`current_umask`), always sent.

    Raises:
        SubmissionError: conflicting or malformed flags (the message names the flag).
    """
    argv = list(argv)
    if wrap is not None:
        argv, batch_script = _wrapped(wrap, argv, job_file), True
        name = "wrap" if name is None else name
    groups: list[dict[str, Any]] | None = None
    together: list[list[str]] = []
    file_policies: dict[str, Any] = {}
    if job_file is not None or ":" in argv or colocate is not None:
        from labgang.launcher.cli import job_groups  # only for a job of groups

        shape = {
            "workers": workers,
            "gpus_per_worker": gpus_per_worker,
            "mig": mig,
            "nodes": nodes,
            "gpu_model": gpu_model,
            "topology": topology,
            "min_workers": min_workers,
            "cpus_per_task": cpus_per_task,
            "mem": mem,
            "mem_per_gpu": mem_per_gpu,
        }
        if job_file is not None:
            if argv or workers != 1 or any(v is not None for k, v in shape.items() if k != "workers"):
                raise SubmissionError(
                    "-f: the job file gives every group's shape and command; leave -n, -g, --mig, -N, "
                    "--gpu-model, --topology, --min-workers, -c, --mem, --mem-per-gpu and CMD off the command line"
                )
            groups, together = job_groups.groups_from_file(job_file)
            file_policies = job_groups.policies_from_file(job_file)  # the flags, given too, win
        else:
            if group_name is not None:
                shape["name"] = group_name
            groups = job_groups.groups_from_argv(shape, argv)
        if colocate is not None:
            if groups is None:
                raise SubmissionError(
                    "--colocate: names groups of a job of groups; give them with CMD : OPTIONS -- CMD or -f job.toml"
                )
            together = together + job_groups.colocate_sets(colocate)
    if group_name is not None and (groups is None or job_file is not None):
        raise SubmissionError(
            "--group: names the first group of a job of groups on the command line (--group NAME -n 1 -- CMD : "
            "OPTIONS -- CMD); a job file names its groups in [[group]] tables"
            if job_file is not None
            else "--group: names the first group of a job of groups (CMD : OPTIONS -- CMD); a job alone has no groups"
        )
    if groups is None and gpus_per_worker == 0:
        raise SubmissionError(
            "-g/--gpus-per-worker: 0 is only for one group of a job of groups (CMD : OPTIONS -- CMD); "
            "allowed: 1 or more"
        )
    if groups is not None:
        argv = groups[0]["argv"]
    if not argv:
        raise SubmissionError("missing CMD: give the command to run after --")
    if mig is not None and gpus_per_worker is not None:
        raise SubmissionError(
            "-g/--gpus-per-worker and --mig exclude each other: a rank gets full GPUs or one MIG device"
        )
    if mig is not None:
        from labgang.launcher.model import MIG_PREFIX, MIG_PROFILE_RE  # only here: model imports dataclasses

        profile = mig[len(MIG_PREFIX) :] if mig.startswith(MIG_PREFIX) else mig
        if not MIG_PROFILE_RE.match(profile):
            raise SubmissionError(
                f"--mig: {mig!r} is not a MIG profile; allowed: a profile name as nvidia-smi shows it, "
                "e.g. 1g.10gb, 3g.40gb, 1g.18gb+me"
            )
        mig = profile
    if requeue and no_requeue:
        raise SubmissionError("--requeue and --no-requeue exclude each other; allowed: one of them")
    if name is not None and not name.strip():
        raise SubmissionError("--name: must not be empty")
    if name is not None and not name.isprintable():  # text.py only then: one module less for a plain submit
        from labgang.launcher.text import control_characters

        if control_characters(name):
            raise SubmissionError(
                f"--name: {name!r} contains control characters ({', '.join(control_characters(name))}); "
                "allowed: printable characters"
            )
    if gpu_model is not None and not gpu_model.strip():  # as Slurm refuses an empty --constraint
        raise SubmissionError(
            "--gpu-model: must not be empty; allowed: part of a GPU name such as H100 (leave it out for any model)"
        )
    if queue is not None and not queue.strip():
        raise SubmissionError("-q/--queue: must not be empty; allowed: a queue name (see `labgang queues`)")
    if array is not None:
        from labgang.launcher.arrays import ARRAY_SIZE_CEILING, BadArraySpec, parse_array  # only with --array

        try:
            parse_array(array, ARRAY_SIZE_CEILING, bound="the most any cluster's limits.max_array_size allows")
        except BadArraySpec as exc:
            raise SubmissionError(f"--array: {exc}") from None
    for flag, pattern in (("-o/--output", output), ("-e/--error", error)):
        if pattern is not None:
            from labgang.launcher.output_pattern import check_pattern  # only with -o/-e

            problem = check_pattern(pattern)
            if problem is not None:
                raise SubmissionError(f"{flag}: {pattern!r}: {problem}")
    host = host_request(cpus_per_task, mem, mem_per_gpu, exclusive)
    if groups is not None and (shards or mps or gpu_mem is not None):
        flag = "--shards" if shards else "--mps" if mps else "--gpu-mem"
        raise SubmissionError(f"{flag}: not for a job of groups; a share is one GPU for a job of one rank")
    host.update(_share_request(shards, mps, gpu_mem, workers, gpus_per_worker, mig, exclusive))
    body: dict[str, Any] = {
        "workers": workers,
        "gpus_per_worker": 1 if gpus_per_worker is None else gpus_per_worker,
        "mig": mig,
        "requeue": not no_requeue,
        "argv": argv,
        "env": {
            k: v
            for k, v in (os.environ if env is None else env).items()
            if k not in RANK_ENV and not k.startswith(LABGANG_ENV_PREFIX)
        },
        "cwd": working_directory(_current_directory() if cwd is None else cwd, chdir),
        "umask": current_umask() if umask is None else umask,  # the ranks get it, as Slurm's SLURM_UMASK
    }
    if batch_script:
        from labgang.launcher.cli.batch_script import with_srun_shim

        body["env"] = with_srun_shim(body["env"])
    optional = {
        "name": name,
        "queue": queue,
        "priority": _priority_value(priority),
        "nodes": nodes,
        "gpu_model": gpu_model,
        "topology": topology,
        "cpu_bind": cpu_bind,
        "min_workers": min_workers,
        "grace_s": grace,
        "time_limit_s": time_limit,
        "signal": signal_spec,
        "array": array,
        "dependency": dependency,
        "begin_time": begin_time,
        "output": output,
        "error": error,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    if hold:
        body["hold"] = True
    if mail_type is not None:
        body["mail_type"] = [item.strip() for item in mail_type.split(",") if item.strip()]
    if mail_user is not None:
        body["mail_user"] = mail_user
    if stdin_data is not None:
        import base64

        body["stdin"] = base64.b64encode(stdin_data).decode("ascii")
    if pty:
        body["pty"] = True
    if attached:
        body["attached"] = True
    if stdin_stream:
        body["stdin_stream"] = True
    body.update(host)
    if groups is not None:
        for key in ("workers", "gpus_per_worker", "mig", "argv", "nodes", "gpu_model", "topology", "min_workers"):
            body.pop(key, None)
        for key in host:
            body.pop(key, None)
        if exclusive:  # the job's: every group takes whole nodes
            body["exclusive"] = True
        body["groups"] = groups
        if together:
            body["colocate"] = together
    body.update(file_policies)
    body.update(_lifecycle_policies(success_policy, failure_policy, max_restarts, startup_order))
    return body


def _wrapped(wrap: str, argv: "list[str]", job_file: "str | None") -> "list[str]":
    """The command of ``submit --wrap "CMD"``: CMD as a one-line ``/bin/sh`` script, as sbatch writes
    it (``/bin/sh -c CMD``; labgang's ``srun`` on its ``PATH``, as for a batch script).

    Raises:
        SubmissionError: ``wrap`` is empty, or a script, ``-- CMD`` or ``-f`` was given too.
    """
    if argv or job_file is not None:
        given = "-f " + job_file if job_file is not None else " ".join(argv)
        raise SubmissionError(
            f"--wrap: the job's command is the --wrap text, so leave out the script or CMD ({given!r}); "
            'allowed: labgang submit --wrap "CMD", or labgang submit SCRIPT, or labgang submit -- CMD'
        )
    if not wrap.strip():
        raise SubmissionError('--wrap: must not be empty; allowed: a shell command line, e.g. --wrap "python train.py"')
    return ["/bin/sh", "-c", wrap]


def _lifecycle_policies(
    success_policy: "str | None", failure_policy: "str | None", max_restarts: "int | None", startup_order: "str | None"
) -> "dict[str, Any]":
    """The body's ``success_policy``, ``failure_policy``, ``max_restarts`` and ``startup_order``
    (only those given; docs/group-lifecycle.md).

    Raises:
        SubmissionError: ``--startup-order`` with an empty group name.
    """
    given = {"success_policy": success_policy, "failure_policy": failure_policy, "max_restarts": max_restarts}
    out: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    if startup_order is not None:
        from labgang.launcher.lifecycle.group_policy import BadGroupPolicy, parse_startup_order

        try:
            out["startup_order"] = list(parse_startup_order(startup_order))
        except BadGroupPolicy as exc:
            raise SubmissionError(str(exc).replace("startup_order:", "--startup-order:", 1)) from None
    return out


def host_request(
    cpus_per_task: "int | None", mem: "str | None", mem_per_gpu: "str | None", exclusive: bool
) -> "dict[str, Any]":
    """The body's host fields (``cpus_per_task``, ``mem`` and ``mem_per_gpu`` in bytes, ``exclusive``).

    Raises:
        SubmissionError: a size that does not parse, or both ``--mem`` and ``--mem-per-gpu``.
    """
    out: dict[str, Any] = {}
    if cpus_per_task is not None:
        out["cpus_per_task"] = cpus_per_task
    if mem is not None and mem_per_gpu is not None:
        raise SubmissionError("--mem and --mem-per-gpu exclude each other: give memory per node or per GPU")
    for flag, key, text in (("--mem", "mem", mem), ("--mem-per-gpu", "mem_per_gpu", mem_per_gpu)):
        if text is not None:
            from labgang.agent.mem_size import parse_mem  # here: a plain `submit` loads no mem_size

            try:
                out[key] = parse_mem(text)
            except ValueError as exc:
                raise SubmissionError(f"{flag}: {exc}") from None
    if exclusive:
        out["exclusive"] = True
    return out


def _share_request(
    shards: "int | None",
    mps: "int | None",
    gpu_mem: "str | None",
    workers: int,
    gpus_per_worker: "int | None",
    mig: "str | None",
    exclusive: bool = False,
) -> "dict[str, Any]":
    """The body's share fields (``shards``, ``mps``, ``gpu_mem`` in bytes), or {} without a share.

    Raises:
        SubmissionError: a malformed share (both kinds, with --mig, with a gang or several GPUs, a bad size).
    """
    if shards is None and mps is None and gpu_mem is None:
        return {}
    from labgang.launcher.share_request import share_problem

    if gpu_mem is not None and not (shards or mps):
        raise SubmissionError("--gpu-mem: a device-memory budget goes with a share of a gpu; add --shards or --mps")
    problem = share_problem(shards or 0, mps or 0, workers, gpus_per_worker or 1, mig, cli=True, exclusive=exclusive)
    if problem is not None:
        raise SubmissionError(problem)
    out: dict[str, Any] = {"shards": shards} if shards else {"mps": mps}
    if gpu_mem is not None:
        from labgang.agent.mem_size import parse_mem

        try:
            out["gpu_mem"] = parse_mem(gpu_mem)
        except ValueError as exc:
            raise SubmissionError(f"--gpu-mem: {exc}") from None
    return out


def gpu_mem_without_unit(body: "dict[str, Any]", gpu_mem: "str | None") -> "str | None":
    """The warning for a ``--gpu-mem`` size written without a unit (``16``), which is read as MiB as
    Slurm reads ``--mem``: ``"--gpu-mem 16 has no unit: read as 16 MiB; write 16G for GiB"``; None
    when it has a unit, or when ``body`` (the built submission) has no ``gpu_mem``."""
    if gpu_mem is None or "gpu_mem" not in body or not gpu_mem.strip().isdigit():
        return None
    size = gpu_mem.strip()
    return f"--gpu-mem {size} has no unit: read as {size} MiB; write {size}G for GiB"


def working_directory(submit_dir: str, chdir: "str | None") -> str:
    """The ranks' working directory: ``submit_dir``, or ``-D/--chdir DIR`` (absolute, or relative to
    ``submit_dir``), normalised.

    Raises:
        SubmissionError: DIR is empty, is not an existing directory, or this user may not enter it
            (one line naming the flag).
    """
    if chdir is None:
        return submit_dir
    if not chdir.strip():
        raise SubmissionError("-D/--chdir: must not be empty; allowed: an existing directory")
    path = os.path.normpath(os.path.join(submit_dir, chdir))
    if not os.path.isdir(path):
        what = "is not a directory" if os.path.exists(path) else "no such directory"
        raise SubmissionError(
            f"-D/--chdir: {chdir!r}: {what} ({path}); allowed: an existing directory, absolute or "
            "relative to the submit directory"
        )
    if not os.access(path, os.X_OK):  # the ranks run as this user: they could not enter it either
        raise SubmissionError(
            f"-D/--chdir: {chdir!r}: permission denied ({path}): you may not enter it; allowed: a directory "
            "you may enter"
        )
    return path


def _current_directory() -> str:
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise SubmissionError(
            "the current directory no longer exists; ranks start in it, so cd somewhere that does"
        ) from None


def _priority_value(priority: "str | None") -> "int | str | None":
    if priority is None:
        return None
    text = priority.strip()
    try:
        return int(text)
    except ValueError:
        pass
    if not text or not text.replace("-", "").replace("_", "").isalnum():
        raise SubmissionError(f"-p/--priority: {priority!r} is neither an integer nor a priority class name")
    return text
