"""Rater models: references beyond the majority vote (``summary.json["rater_models"]``,
``rater_models.csv``, columns of ``raters.csv``).

A latent-class model treats each item's true answer as unknown and each rater as a noisy
channel, and fits both by expectation–maximisation from the votes alone (no gold labels):

* **Dawid–Skene** (Dawid & Skene 1979): each rater has a confusion matrix — here its
  sensitivity P(votes present | present) and specificity P(votes absent | absent);
* **one-coin Dawid–Skene**: one skill per rater, the probability of answering correctly
  whatever the truth;
* **MACE** (Hovy et al. 2013): each rater either knows the answer or answers by a strategy of
  their own; its competence is the probability of knowing.

All three are Toloka's crowd-kit implementations (MACE seeded), fitted on the binary votes of
every item (items rated by one rater included: their posterior rests on that rater's channel
and the prior — counted in ``items_one_rater``, not hidden). Per item: each model's posterior
probability of "present" and its label (posterior ≥ 0.5). A model that reaches its iteration
limit without meeting its tolerance is reported ``converged: false`` (Dawid–Skene variants:
``tol`` 1e-5 on the log-likelihood; MACE runs a fixed number of variational iterations and is
not checked). ``labels_differ_from_majority`` counts items with a (non-tied) majority whose
model label differs from it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .ceiling import ceiling_block, channel_means, dawid_skene_refit, mean_rating_reliability
from .resampling import Bootstrap

N_ITER = 100
# MACE keeps the best of this many seeded starts; crowd-kit's default 10 took 6.7 s on the real
# emo export (2: 1.3 s) for binary votes whose likelihood has few local optima
MACE_RESTARTS = 2
MACE_ITER = 50  # crowd-kit's default
MODELS = ("dawid_skene", "one_coin_dawid_skene", "mace")


def fit_rater_models(votes: pd.DataFrame, rater_names: list, majority: np.ndarray, majority_tie: np.ndarray,
                     *, bootstrap: Bootstrap) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """(summary block, per-item frame, per-rater frame) for ``votes`` (``item`` codes 0..n-1,
    ``rater`` codes into ``rater_names``, ``binary``, ``value``); ``majority``/``majority_tie`` per
    item code. MACE is seeded with ``bootstrap.seed``; the noise ceiling and the reliability of
    the mean rating (:mod:`ceiling`) resample items with ``bootstrap``."""
    with warnings.catch_warnings():  # crowd-kit's own imports warn about optional extras
        warnings.simplefilter("ignore")
        from crowdkit.aggregation import MACE, DawidSkene, OneCoinDawidSkene

    n_items = int(votes["item"].max()) + 1 if len(votes) else 0
    data = pd.DataFrame({"task": votes["item"].to_numpy(), "worker": votes["rater"].to_numpy(),
                         "label": votes["binary"].to_numpy()}).sort_values(["worker", "task"], kind="stable")
    per_item = pd.DataFrame(index=pd.RangeIndex(n_items))
    per_rater = pd.DataFrame({"rater": rater_names})
    n_votes = np.bincount(votes["item"].to_numpy(), minlength=n_items)
    block = {"definition": "latent-class rater models fitted on the binary votes (README: rater models)",
             "items": n_items, "items_one_rater": int((n_votes == 1).sum()),
             "items_with_a_majority": int((~majority_tie).sum())}
    if n_items == 0 or data["label"].nunique() < 2:
        return {**block, **dict.fromkeys(MODELS), "noise_ceiling": None, "mean_rating_reliability": None}, per_item, per_rater
    workers = np.arange(len(rater_names))
    for name in MODELS:
        with warnings.catch_warnings():  # crowd-kit's code uses pandas features pandas 3 deprecates
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            warnings.filterwarnings("ignore", category=FutureWarning)
            if name == "mace":
                model = MACE(n_iter=MACE_ITER, n_restarts=MACE_RESTARTS, random_state=bootstrap.seed).fit(data)
                converged = None
            else:
                model = (DawidSkene if name == "dawid_skene" else OneCoinDawidSkene)(n_iter=N_ITER).fit(data)
                converged = len(model.loss_history_) < N_ITER
        posterior = model.probas_.reindex(index=range(n_items)).get(1, pd.Series(0.0, index=range(n_items)))
        posterior = posterior.fillna(0.0).to_numpy(np.float64)
        label = (posterior >= 0.5).astype(np.int64)
        per_item[f"{name}_present_probability"] = posterior
        per_item[f"{name}_label"] = label
        block[name] = {"converged": converged,
                       "iterations": MACE_ITER if name == "mace" else len(model.loss_history_),
                       "labels_differ_from_majority": int((label != majority)[~majority_tie].sum()),
                       "present_rate": float(label.mean())}
        if name == "dawid_skene":
            errors = model.errors_  # index (worker, observed label), columns: the true label
            per_rater["ds_sensitivity"] = [float(errors.loc[(w, 1), 1]) if (w, 1) in errors.index else None for w in workers]
            per_rater["ds_specificity"] = [float(errors.loc[(w, 0), 0]) if (w, 0) in errors.index else None for w in workers]
        elif name == "one_coin_dawid_skene":
            per_rater["one_coin_skill"] = model.skills_.reindex(workers).to_numpy(np.float64)
        else:  # spamming_[:, 1]: the probability of knowing the answer, workers in order of appearance
            order = pd.unique(data["worker"])
            competence = pd.Series(model.spamming_[:, 1], index=order).reindex(workers)
            per_rater["mace_competence"] = competence.to_numpy(np.float64)
    # the noise ceiling: how well any scorer could predict a new vote, from the Dawid-Skene channels
    s_bar, c_bar = channel_means(per_rater["ds_sensitivity"].to_numpy(np.float64),
                                 per_rater["ds_specificity"].to_numpy(np.float64),
                                 np.bincount(votes["rater"].to_numpy(), minlength=len(rater_names)))
    items = np.arange(n_items)
    refit = dawid_skene_refit(votes["item"].to_numpy(), votes["rater"].to_numpy(), votes["binary"].to_numpy(), n_items,
                              len(rater_names), block["dawid_skene"]["iterations"])
    block["noise_ceiling"] = ceiling_block(refit, items, bootstrap=bootstrap, channels=(s_bar, c_bar),
                                           agreements={"humans": pairwise_agreement_per_item(votes, n_items)})
    block["mean_rating_reliability"] = mean_rating_reliability(votes["value"].to_numpy(np.float64),
                                                               votes["item"].to_numpy(), items, bootstrap=bootstrap)
    return block, per_item, per_rater


def pairwise_agreement_per_item(votes: pd.DataFrame, n_items: int) -> np.ndarray:
    """Per item: the share of its pairs of raters whose binary votes agree — one rater's vote
    against another's, the humans' figure beside the ceiling (NaN with fewer than 2 votes)."""
    item = votes["item"].to_numpy()
    n = np.bincount(item, minlength=n_items).astype(np.float64)
    k = np.bincount(item, weights=votes["binary"].to_numpy(np.float64), minlength=n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n >= 2, (k * (k - 1) + (n - k) * (n - k - 1)) / (n * (n - 1)), np.nan)
