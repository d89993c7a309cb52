"""The error band every point carries: how far measured throughput falls from the model's,
from the model's errors on measurements held out of its fit.

``bands.json`` (beside this module) is written by ``scripts/explore_validate.py``: the 10th
and 90th percentiles of measured / model total tokens/s per GPU over the InferenceX points,
each predicted with its hardware held out of the fit. A point's ``tok_s_chip_lo`` and
``tok_s_chip_hi`` are its ``tok_s_chip`` times those two ratios (a nominal 80% band), and
``tok_s_kw_lo`` and ``tok_s_kw_hi`` the same for tokens per kW: power itself has no published
measurement to check it against, so its own error is not in the band. The script reports how
many held-out points each hardware's band, built without that hardware, actually holds.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

__all__ = ["BANDS", "band"]

#: The file the validation writes and the model reads.
BANDS = Path(__file__).with_name("bands.json")


@functools.cache
def band() -> tuple[float, float]:
    """The ratios (low, high) that bound measured over modelled throughput."""
    data = json.loads(BANDS.read_text())
    return data["low"], data["high"]
