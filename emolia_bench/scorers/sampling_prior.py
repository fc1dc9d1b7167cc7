"""The sampling prior as a scorer (README: “Scorers”): reads no audio.

similarity = +1 where the item was sampled to be present (its subset's prior column holds a
positive value: emo ``task_type`` affirmative, dim ``polarity`` positive), −1 otherwise — the
``sampling_prior`` column of the selected rows. At the default threshold 0 its decisions are
the prior's. It is the baseline that costs nothing, scored as a run of its own so compare.py
ranks a model beside it; every run also reports it as a baseline row.
"""

from __future__ import annotations

from . import Scorer, ScoreResult


class SamplingPriorScorer(Scorer):
    mode = "sampling_prior"
    shows_progress = False  # a column read: nothing to wait for

    def score(self, rows, dataset_root, progress=None) -> ScoreResult:
        sims = rows["sampling_prior"].to_numpy(dtype="float64")
        if progress is not None:
            progress.update(len(rows))
        return ScoreResult(similarity=sims, error=[None] * len(rows))
