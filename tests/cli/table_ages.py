"""Ages in command output, which move between two whole commands run one after the other."""

from __future__ import annotations

import re

AGE = re.compile(r"\b\d+[smhd](?:\d+[smhd])*\b")
"""An age as ``queue`` and ``show`` write it (``2s``, ``1m05s``, ``3h02m``)."""


def without_ages(text: str) -> str:
    """``text`` with each age written ``AGE``: two commands' outputs compared a second apart."""
    return AGE.sub("AGE", text)
