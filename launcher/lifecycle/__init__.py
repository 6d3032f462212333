"""The job lifecycle model, shared by the coordinator and ``labgang simulate``.

``states`` (job states, rank phases, end intents and reasons, the transitions table and the
guarded ``transition()``), ``records`` (the job and rank records), ``rules`` (admission and
victim order, who may be a victim, how an attempt ends). Pure: no I/O, no clock reads.
Submodules are imported by name; this package imports nothing, so ``launcher/model.py`` can
re-export ``JobState`` without an import cycle.
"""
