"""The cluster configuration (``cluster.toml``), validated with pydantic; read by the coordinator,
the CLI, ``labgang simulate``, ``plan`` and ``export`` alike.

Module map::

    cluster.py    ClusterConfig, load_config: the file, its top level, the embedded default
    queues.py     [[queues]], [[cohorts]], [[tenants]] and fair sharing (shared with scenario files)
    limits.py     [limits]: submission sizes, page sizes, connections per client
    sharing.py    [sharing] and the queues' share_with rule (shared with scenario files)
    notify.py     [notify] and --mail-type's values: which events, what a notification says
    record.py     the config an instance runs with, recorded in its store at each start
    errors.py     ConfigError and pydantic's errors in labgang's words (one line per problem)
"""
