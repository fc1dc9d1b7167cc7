"""The deterministic sham scorer (README: “Scorers”): reads no audio, hashes stem and prompt.

similarity = 2·u/2⁶⁴ − 1, u = the first 8 bytes (big-endian) of
SHA-256("clap-sham-v1" + stem + "|" + prompt), UTF-8. It proves the plumbing and gives a
chance-level reference; it knows nothing about audio.
"""

from __future__ import annotations

import hashlib

from . import Scorer, ScoreResult

SALT = b"clap-sham-v1"


def sham_similarity(stem: str, prompt: str) -> float:
    digest = hashlib.sha256(SALT + stem.encode("utf-8") + b"|" + prompt.encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big")
    return 2 * u / 2**64 - 1  # exact integer arithmetic, one rounding in the division


class ShamScorer(Scorer):
    mode = "sham_hash"
    shows_progress = False  # a subset is hashed in a blink: a bar would only flash

    def score(self, rows, dataset_root, progress=None) -> ScoreResult:
        import numpy as np

        # plain lists: iterating pandas' string arrays boxes every element
        stems, prompts = rows["item_stem"].tolist(), rows["prompt"].tolist()
        sims = np.array([sham_similarity(s, p) for s, p in zip(stems, prompts, strict=True)], dtype=np.float64)
        if progress is not None:
            progress.update(len(rows))
        return ScoreResult(similarity=sims, error=[None] * len(rows))
