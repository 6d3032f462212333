"""The coordinator service: durable job state, the scheduling loop, the user API, the agent link.

Module map (data flows top to bottom)::

    app.py        create_app(config, state_dir) / serve(...): aiohttp app, listeners, cleanup_ctx
    routes.py     aiohttp routes, SO_PEERCRED caller, the one error middleware, forwarded requests
    handlers.py   the user API operations (one table, served to sockets and to forwarded requests)
    requests.py   POST /v1/jobs validation -> JobSpec; Caller
    link.py       GET /v1/agent/link: token check, hello, message loop
    agents.py     AgentConn / AgentRegistry: per-node state and command round-trips
    core.py       Coordinator: the composition root of the parts below
    commits.py    Commits (a Coordinator part): the shell around launcher/lifecycle/ (event in -> commit -> effects out)
    node_events.py NodeEvents (a Coordinator part): agents' hello/inventory/rank events/disconnect, node timers
    job_operations.py JobOperations (a Coordinator part, the JobDesk): submit, cancel, list, history, report, logs
    translate.py  agent rank events / statuses / launch answers -> lifecycle events
    scheduling.py snapshot from the model + live inventories -> run_cycle -> CycleDecided
    dispatch.py   Dispatcher (a Coordinator part): admitted gangs -> launch commands (after commit); stop / signal
    views.py      JobView, history rows, queue usage, node/device state
    job_views.py  JobViews (a Coordinator part): each job's views kept while unchanged; the private_data rule
    timers.py     Timer: the seam the scheduler's wakes go through (LoopTimer: the event loop); Kicks, Wakes
    tasks.py      BackgroundTasks: agent commands after a commit, forwarded requests; cancelled at shutdown
    metrics.py    GET /metrics (Prometheus collectors over the same views)
    errors.py     domain errors with their HTTP status, and the one JSON error mapping
    store.py      the durable state: SQLite (WAL), the one source of truth
    policy.py     who may use which priority class in a queue; per-user submission limits
    keys.py       the application's typed AppKeys
    ratelog.py    rate-limited logging (the same error a thousand times a second, written a few times)
    version_compat.py  which coordinator and agent versions work together (the link's handshake)

The Coordinator holds its parts and hands each function only the parts it reads: the store,
the lifecycle model, ``JobMemory`` (jobindex.py: the finished jobs kept, submission order,
finished counts), the ``AgentRegistry`` (each ``AgentConn`` changes its own fields: ``heard``,
``take_inventory``, ``mark_lost``...), ``Commits`` (commits.py, with its ``Dispatcher``), ``Kicks`` and
``Wakes`` (timers.py), ``BackgroundTasks`` (tasks.py), ``SubmissionCheck``, ``AdmissionGate`` and ``CycleMetrics``
(scheduling.py), ``JobViews`` (the view cache, the pitfall job views and the queue table's rows),
the ``Timer``, and what the application attaches (``report_to`` metrics, ``watch_pitfalls``). Its
parts are read-only properties; the agent registry and the timer may be handed in at construction
(a test's simulated agents and clock). Views take the agents, configuration and jobs
(``views.queue_views``/``node_views``; ``Coordinator.queue_views()``/``node_views()`` hand them
in); the user operations are the ``JobOperations`` part (job_operations.py), which is the ``JobDesk``
(desk.py: clock, get_job, apply, flush) the verbs and array cancellation take
and the parts they read; the scheduling and timer loops take the cycle driver, ``Kicks``,
``Commits`` and the ``AdmissionGate`` (scheduling.py). What agents report and the
node timers are the ``NodeEvents`` part (node_events.py), handed the registry, the model, the
submission check, the clock and the ``Commits`` part that applies and commits; the link hands it
each frame, the timer loop calls its ``check_timers``. Each user API operation (handlers.py) takes
the parts it uses; ``handlers.ROUTES`` binds it to the coordinator's parts (``Route.bind``), the one
place where they are picked, once at startup (``handlers.bind_routes``: ``app[keys.ROUTES]``, which
the sockets and forwarded requests are served from; docs/architecture.md, "The coordinator's parts").
No function is handed the coordinator itself.
"""
