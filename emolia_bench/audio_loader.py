"""Clips to model inputs in worker processes, so the model never waits for the CPU.

torch's ``DataLoader`` runs :class:`ClipInputs` in ``workers`` processes: each reads a clip,
checks its sha256 against the key it was planned under, decodes, resamples and crops it, and turns
it into the model's inputs on its own (the embedder's ``prep``); :func:`collate` stacks a batch's
inputs into tensors (in the worker, so they reach the main process through shared memory), and
the loader pins them for a non-blocking copy to the GPU while the next batches are being decoded
(two per worker ahead). ``workers=0`` decodes in the main process, one batch after another.
The batches are the ones planned, in order, whatever the worker count, so scores do not depend on
it. A clip that cannot be read or decoded is its own error and leaves the rest of its batch alone.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from .paths import ClipRefused, read_clip


def default_decode_workers(local_world: int = 1, cap: int = 8) -> int:
    """The cores this process may use, shared among the ranks on its node, at most ``cap``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(0, min(cap, cores // max(1, local_world)))


class ClipInputs:
    """Map-style dataset over ``jobs`` = [(key, relative path)]: item i is ``(key, inputs or None,
    error or None, seconds spent)``. ``prep`` turns a clip's bytes into a dict of arrays, each with
    a leading axis of 1, or a list of one entry for inputs of varying length."""

    def __init__(self, jobs: list[tuple[str, str]], dataset_root: Path, prep):
        self.jobs, self.root, self.prep = jobs, Path(dataset_root), prep

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, i: int):
        key, rel = self.jobs[i]
        started = time.perf_counter()
        try:
            data = read_clip(self.root, rel)
        except ClipRefused as e:
            return key, None, str(e), time.perf_counter() - started
        if "a:" + hashlib.sha256(data).hexdigest() != key:
            return key, None, f"audio_changed: {rel} changed while the run was scoring it", time.perf_counter() - started
        try:
            inputs = self.prep(data)
        except Exception as e:  # noqa: BLE001 - any decoder failure is this clip's error
            return key, None, f"audio_undecodable: {type(e).__name__}: {str(e)[:120]}", time.perf_counter() - started
        return key, inputs, None, time.perf_counter() - started


def join_inputs(parts: list[dict]) -> dict:
    """Several clips' inputs as one batch: each name's arrays concatenated along their leading
    axis into one tensor, its lists joined."""
    import numpy as np
    import torch

    joined: dict = {}
    for name in (parts[0] if parts else {}):
        values = [p[name] for p in parts]
        if isinstance(values[0], list):
            joined[name] = [v for value in values for v in value]
        else:
            joined[name] = torch.from_numpy(np.concatenate(values))
    return joined


def collate(items: list) -> dict:
    """One batch: ``keys`` of the clips that decoded, their joined ``inputs``, ``errors`` by
    key and the workers' ``decode_seconds``."""
    ok = [(key, inputs) for key, inputs, error, _ in items if error is None]
    return {"keys": [key for key, _ in ok], "inputs": join_inputs([inputs for _, inputs in ok]),
            "errors": {key: error for key, _, error, _ in items if error is not None},
            "decode_seconds": sum(seconds for *_, seconds in items)}


def clip_batches(jobs: list[tuple[str, str]], batches: list[list[int]], dataset_root: Path, prep, workers: int,
                 pin_memory: bool):
    """The collated ``batches`` (lists of indices into ``jobs``), in order; the workers start when
    iteration does."""
    from torch.utils.data import DataLoader

    workers = max(0, min(workers, len(batches)))  # a worker without a batch only costs its start
    return DataLoader(ClipInputs(jobs, dataset_root, prep), batch_sampler=batches, num_workers=workers,
                      collate_fn=collate, pin_memory=pin_memory, prefetch_factor=2 if workers else None)
