"""``labgang export``: a lab's queue policy as Kueue objects or Slurm configuration.

:mod:`.common` holds what both targets share (the inventory summary, name rules,
:class:`~.common.Gap` for what does not translate, :class:`~.common.ExportError` for
configs that cannot be exported at all); :mod:`.kueue` and :mod:`.slurm` build the
two targets; :mod:`.inventory` reads GPU models and MIG profiles from the coordinator
or from machine files; :mod:`.cli` is the command. The field mapping is in
``docs/export.md``.
"""
