"""``labgang plan``: how many GPUs the lab needs (docs/planning.md).

- :mod:`.past` reads a period's finished jobs from the store, read-only.
- :mod:`.export` writes them as a scenario file (``labgang history --export``).
- :mod:`.sources` says where a store replay's nodes and queue policy come from.
- :mod:`.replay` runs a history through the ``labgang simulate`` engine (the coordinator's
  scheduler and lifecycle) under a changed config or cluster, and measures it per queue.
- :mod:`.target` parses ``--target`` and searches the smallest added capacity meeting them.
- :mod:`.report` is the text of ``plan replay``.
- :mod:`.serve` is ``plan serve``: replicas and GPUs for an inference deployment.
"""
