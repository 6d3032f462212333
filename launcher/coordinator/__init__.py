"""The coordinator service: durable job state, the scheduling loop, the user API, the agent link.

Module map (data flows top to bottom)::

    app.py        create_app(config, state_dir) / serve(...): aiohttp app, listeners, cleanup_ctx
    routes.py     aiohttp routes, SO_PEERCRED caller, the one error middleware, forwarded requests
    handlers.py   the user API operations (one table, served to sockets and to forwarded requests)
    requests.py   POST /v1/jobs validation -> JobSpec; Caller
    link.py       GET /v1/agent/link: token check, hello, message loop
    agents.py     AgentConn / AgentRegistry: per-node state and command round-trips
    core.py       Coordinator: jobs in memory (the store is the truth), user operations, effects
    scheduling.py snapshot from store + live inventories -> run_cycle -> decisions recorded
    dispatch.py   admitted gangs -> launch commands (after the commit); stop / signal
    lifecycle.py  gang rules: start confirmation, failure, preemption, lost nodes, timeouts
    views.py      JobView, queue usage, node/device state
    errors.py     domain errors with their HTTP status
"""
