"""The model backends: one small interface, a registry, one module per backend.

Every backend subclasses :class:`Scorer` and says what benchmark.py needs to know without
asking which backend it is: ``mode`` (written to summary.json), ``endpoint`` (the URL or URLs
scored, or None), ``shows_progress`` (False for a backend that scores a whole subset in
milliseconds: no bar then), ``score(rows, dataset_root, progress) -> ScoreResult`` and
``summary_line()`` (one line about the work done, or None) and ``info()`` (what summary.json
records about the model, or None). Backends are imported only when
chosen, so optional dependencies (HTTP, torch...) cost nothing until used.
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
    "sampling_prior": ("emolia_bench.scorers.sampling_prior", "SamplingPriorScorer"),
    "endpoint": ("emolia_bench.scorers.endpoint", "EndpointScorer"),
    "clap": ("emolia_bench.scorers.clap", "ClapScorer"),
}


@dataclass
class ScoreResult:
    """One similarity per row (NaN where scoring failed) and the error text (None when ok)."""

    similarity: np.ndarray
    error: list[str | None]


class Scorer:
    """The interface every backend implements (the defaults suit a backend that shows progress
    and has nothing to report beyond its scores)."""

    mode: str = ""
    endpoint: str | list[str] | None = None
    shows_progress: bool = True

    def score(self, rows, dataset_root, progress=None) -> ScoreResult:
        """One similarity per row of ``rows`` (``prompt``, ``audio_path`` relative to
        ``dataset_root``, ``item_stem``); ``progress.update(k)`` as rows finish."""
        raise NotImplementedError

    def summary_line(self) -> str | None:
        """One line about the work this scorer did (requests, cache hits…), printed after the run."""
        return None

    def info(self) -> dict | None:
        """What summary.json records about the model behind the scores (None: nothing beyond mode
        and endpoint)."""
        return None


def get_scorer(name: str, **options) -> Scorer:
    if name not in REGISTRY:
        raise ValueError(f"unknown scorer {name!r}; expected one of {', '.join(REGISTRY)}")
    module, cls = REGISTRY[name]
    return getattr(importlib.import_module(module), cls)(**options)


def progress_bar(scorer: Scorer, total: int, desc: str, show: bool = True):
    """A tqdm bar (rows, rate; scorers add the error count) for a scorer that takes a while; for
    an instant one, or where ``show`` is False (torchrun's other ranks), no bar (it would only flash)."""
    if not (show and scorer.shows_progress):
        return contextlib.nullcontext()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="row", mininterval=0.5, file=sys.stderr)
