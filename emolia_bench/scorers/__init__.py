"""The registry of model backends.

Each backend is one module exposing a class with ``mode`` (written to summary.json),
``endpoint`` and ``score(rows, dataset_root, progress) -> ScoreResult``, and optionally
``instant = True`` when it scores a whole subset in milliseconds (no progress bar then).
Backends are imported only when chosen, so optional dependencies (HTTP, torch...) cost nothing
until used.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is not imported at run time here: the sham server needs none of it
    import numpy as np

REGISTRY = {
    "sham": ("emolia_bench.scorers.sham", "ShamScorer"),
    "endpoint": ("emolia_bench.scorers.endpoint", "EndpointScorer"),
    "clap": ("emolia_bench.scorers.clap", "ClapScorer"),
}


@dataclass
class ScoreResult:
    """One similarity per row (NaN where scoring failed) and the error text (None when ok)."""

    similarity: np.ndarray
    error: list[str | None]


def get_scorer(name: str, **options):
    if name not in REGISTRY:
        raise ValueError(f"unknown scorer {name!r}; expected one of {', '.join(REGISTRY)}")
    module, cls = REGISTRY[name]
    return getattr(importlib.import_module(module), cls)(**options)


def progress_bar(scorer, total: int, desc: str):
    """A tqdm bar (rows, rate; scorers add the error count) for a scorer that takes a while; for
    an instant one, no bar and no tqdm import (~0.08 s, a twentieth of a sham run)."""
    if getattr(scorer, "instant", False):
        return contextlib.nullcontext()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="row", mininterval=0.5, file=sys.stderr)
