"""Prompt templates: several wordings of one query, each scored, and their ensemble.

A template is a format string with the subset's one field (``{emotion}`` for emolia-emo,
``{rubric}`` — the level's rubric text — for emolia-dim; ``{{`` and ``}}`` for literal braces).
A template belongs to the subset whose field it names; a subset given none keeps upstream's
prompt (``Subset.default_template``).

Every template is scored on every row. The **ensemble** similarity of a row is the mean of its
per-template similarities. For cosine similarity this *is* the cosine with the mean of the
normalised text embeddings (the dot product is linear: mean_k <a, t_k> = <a, mean_k t_k>), the
prompt-ensemble of CLIP-style zero-shot work without re-normalising the mean — so an in-process
run and a run through an endpoint (which only returns similarities) give the same number; for
``logit`` it is scale·(mean cos) + bias, the same identity. A row whose clip fails under any
template is an error row of the ensemble.

Per template and for the ensemble, on the same rows (those scored under every template): AUROC
(threshold-free) and balanced accuracy at the run's threshold, and the spread best / mean / worst
over templates. The best template is picked on the very rows it is reported on, so it is an
optimistic figure; the mean over templates and the ensemble are not tuned on anything.
"""

from __future__ import annotations

import string

import numpy as np
import pandas as pd

from .errors import InputError
from .metrics import binary_metrics, ranking_metrics
from .scorers import ScoreResult


def template_fields(template: str) -> set[str]:
    """The field names of a format string; ValueError when its braces are malformed or a field
    carries a format spec or a conversion (``{emotion:d}``, ``{emotion!r}``): a field is
    replaced by its text, nothing else."""
    names = set()
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if spec or conversion:
            raise ValueError(f"field {{{name}}} has a format spec or conversion; write it as {{{name}}} alone")
        names.add(name)
    return names


def templates_by_subset(templates: list[str] | None, subsets) -> dict[str, list[str] | None]:
    """Assign each ``--prompt-template`` to the subset whose field it names; bad input for a
    template with malformed braces, with no field, or with a field no subset in ``subsets`` has.
    A subset given no template maps to None (upstream's prompt)."""
    out: dict[str, list[str] | None] = {s.name: None for s in subsets}
    fields = {s.template_field: s.name for s in subsets}
    names = ", ".join(f"{{{s.template_field}}} for {s.name}" for s in subsets)
    for t in templates or []:
        try:
            found = template_fields(t)
        except ValueError as e:
            raise InputError("--prompt-template", f"{t!r} is not a valid template ({e}); use {{{{ and }}}} for literal braces") from None
        if len(found) != 1 or next(iter(found)) not in fields:
            raise InputError("--prompt-template", f"{t!r} must name exactly one field of the subsets run ({names}); "
                                                  f"it names {', '.join(sorted(found)) or 'none'}")
        subset = fields[next(iter(found))]
        if t not in (out[subset] or []):
            out[subset] = [*(out[subset] or []), t]
    return out


def score_templates(scorer, rows: pd.DataFrame, prompts: list[pd.Series], dataset_root, progress=None
                    ) -> tuple[ScoreResult, list[np.ndarray]]:
    """Score ``rows`` under each template's prompts in one call (so a scorer embeds each clip
    once and runs its requests concurrently) and return the ensemble's result and each
    template's similarities (NaN where that template failed)."""
    k, n = len(prompts), len(rows)
    if k == 1:
        result = scorer.score(rows.assign(prompt=prompts[0].to_numpy()), dataset_root, progress)
        return result, [np.asarray(result.similarity, dtype=np.float64)]
    stacked = pd.concat([rows.assign(prompt=p.to_numpy()) for p in prompts], ignore_index=True)
    result = scorer.score(stacked, dataset_root, progress)
    sims = np.asarray(result.similarity, dtype=np.float64).reshape(k, n)
    errors = np.asarray(result.error, dtype=object).reshape(k, n)
    error: list[str | None] = []
    for j in range(n):
        failed = next(((i, e) for i, e in enumerate(errors[:, j]) if e is not None), None)
        error.append(None if failed is None else f"template {failed[0] + 1}: {failed[1]}")
    ensemble = sims.mean(axis=0)
    ensemble[[e is not None for e in error]] = np.nan
    return ScoreResult(similarity=ensemble, error=error), list(sims)


def template_report(templates: list[str], truth: np.ndarray, per_template: list[np.ndarray], ensemble: np.ndarray,
                    threshold: float) -> tuple[pd.DataFrame, dict]:
    """metrics_by_template.csv (one row per template, then the ensemble) and the summary.json
    block: n, AUROC, balanced accuracy at ``threshold`` (None where a class is absent), and the
    spread over templates."""
    records = []
    for label, template, sims in [*((f"template {i + 1}", t, s) for i, (t, s) in enumerate(zip(templates, per_template, strict=True))),
                                  ("ensemble", "mean of the similarities above", ensemble)]:
        m = binary_metrics(truth, (sims >= threshold).astype(np.int64))
        r = ranking_metrics(truth, sims)
        records.append({"template": label, "text": template, "n": int(len(truth)), "auroc": r["auroc"],
                        "balanced_accuracy": m["balanced_accuracy"], "accuracy": m["accuracy"]})
    table = pd.DataFrame(records)

    def spread(column: str) -> dict:
        values = [v for v in table[column].iloc[:-1] if v is not None and v == v]
        if not values:
            return {"best": None, "mean": None, "worst": None}
        return {"best": float(max(values)), "mean": float(np.mean(values)), "worst": float(min(values))}

    block = {"templates": list(templates), "n": int(len(truth)), "threshold": float(threshold),
             "per_template": [{k: r[k] for k in ("template", "text", "auroc", "balanced_accuracy")} for r in records[:-1]],
             "ensemble": {k: records[-1][k] for k in ("auroc", "balanced_accuracy")},
             "spread": {"auroc": spread("auroc"), "balanced_accuracy": spread("balanced_accuracy")},
             "ensemble_definition": "mean over templates of each row's similarity (= cosine with the mean of the "
                                    "normalised text embeddings)",
             "best_is_tuned_on_these_rows": True}
    return table, block
