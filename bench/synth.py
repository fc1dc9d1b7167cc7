"""Realistic synthetic exports at any scale, for the bench scripts (vectorised, seconds at 10×).

At scale 1: emolia-emo ≈ 8,000 items × 3 raters ≈ 24,000 rows with ~0.4 % re-ratings, like the
real export; emolia-dim ≈ 34,000 rows over a sparse panel of 12 raters (1–4 raters per item,
mostly 1), word levels for LANG, and a few flags.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

EMOTIONS = [f"Emotion_{i:02d}" for i in range(38)] + ["Jealousy___Envy", "Astonishment_Surprise"]
TASKS = np.array(["affirmative", "contrastive_1", "contrastive_2", "penultimate", "ultimate"])
P_PRESENT = np.array([0.8, 0.4, 0.3, 0.25, 0.15])
DIMS = [f"D{i:03d}" for i in range(57)] + ["LANG"]
LANG_LEVELS = np.array(["Americas", "Asian_Pacific", "European", "Middle_Eastern_African"])
USERS_COLS = ["username", "is_active", "is_admin", "onboarded", "annotation_count", "created_at", "age", "languages",
              "gender", "consent", "degree", "expertise", "listening_setup"]


def _times(rng, n, start="2026-04-01 09:00:00"):
    base = np.datetime64(start)
    t = base + rng.integers(0, 30 * 24 * 3600, n).astype("timedelta64[s]")
    return pd.Series(t).dt.strftime("%Y-%m-%d %H:%M:%S")


def _uuids(n, offset):
    ids = np.arange(offset, offset + n)
    return pd.Series(ids).map(lambda i: f"00000000-0000-4000-8000-{i:012d}")


def _users(names):
    return pd.DataFrame({"username": names, "is_active": "1", "is_admin": "0", "onboarded": "True",
                         "annotation_count": "0", "created_at": "2026-03-30T16:54:45.577Z", "age": "30",
                         "languages": "English,German", "gender": "Female", "consent": "True", "degree": "MSc",
                         "expertise": "3", "listening_setup": "Headphones (over-ear)"})[USERS_COLS]


def emo_export(scale: float, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    n_clips = int(1600 * scale)
    clip = np.repeat(np.arange(n_clips), 5)
    task = np.tile(np.arange(5), n_clips)
    source = rng.integers(0, len(EMOTIONS), n_clips)[clip]
    queried = np.where(task == 0, source, (source + rng.integers(1, len(EMOTIONS), len(clip))) % len(EMOTIONS))
    n_items = len(clip)
    item = np.repeat(np.arange(n_items), 3)
    rater = np.tile(np.arange(3), n_items)
    present = rng.random(len(item)) < P_PRESENT[task[item]]
    rating = np.where(present, np.where(rng.random(len(item)) < 0.55, "strongly_present", "weakly_present"), "not_present")
    emo = np.array(EMOTIONS)
    df = pd.DataFrame({
        "username": np.char.add("user_", rater.astype(str)),
        "source_emotion": emo[source[item]],
        "queried_emotion": emo[queried[item]],
        "task_type": TASKS[task[item]],
        "file_name": np.char.add(np.char.add("EN_B", np.char.zfill(clip[item].astype(str), 6)), "_W000000.mp3"),
        "rating": rating,
        "reaction_time_ms": rng.integers(800, 20000, len(item)).astype(str),
        "sample_time_ms": rng.integers(2000, 25000, len(item)).astype(str),
        "created_at": _times(rng, len(item)),
    })
    rerate = df.sample(frac=0.004, random_state=seed).copy()
    rerate["created_at"] = "2026-03-31 08:00:00"  # earlier: superseded
    df = pd.concat([df, rerate], ignore_index=True)
    df.insert(0, "annotation_id", _uuids(len(df), 0))
    return df, _users(["user_0", "user_1", "user_2"])


def dim_export(scale: float, seed: int = 2) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    n_items = int(37000 * scale)
    dim = rng.integers(0, len(DIMS), n_items)
    level = rng.integers(0, 7, n_items).astype(str).astype(object)
    is_lang = np.array(DIMS)[dim] == "LANG"
    level[is_lang] = LANG_LEVELS[rng.integers(0, 4, is_lang.sum())]
    pol = np.where(rng.random(n_items) < 0.5, "positive", "negative")
    file_no = rng.integers(0, max(25, int(100 * scale)), n_items)
    items = pd.DataFrame({"dimension": np.array(DIMS)[dim], "level": level, "polarity": pol,
                          "file_name": np.char.add(np.char.add("sample_", np.char.zfill(file_no.astype(str), 2)), ".mp3")}).drop_duplicates(ignore_index=True)
    k = rng.choice([1, 2, 3, 4], size=len(items), p=[0.92, 0.05, 0.02, 0.01])
    item = np.repeat(np.arange(len(items)), k)
    # distinct raters per item: a random offset plus 0..k-1 steps, modulo the panel of 12
    first = rng.integers(0, 12, len(items))[item]
    step = np.arange(len(item)) - np.repeat(np.cumsum(k) - k, k)
    rater = (first + step) % 12
    yes = rng.random(len(item)) < np.where(items["polarity"].to_numpy()[item] == "positive", 0.7, 0.3)
    df = items.iloc[item].reset_index(drop=True)
    df.insert(0, "username", np.char.add("user_", rater.astype(str)))
    df["rating"] = np.where(yes, "yes", "no")
    df["reaction_time_ms"] = rng.integers(800, 20000, len(df)).astype(str)
    df["sample_time_ms"] = rng.integers(2000, 25000, len(df)).astype(str)
    df["created_at"] = _times(rng, len(df), "2026-05-01 09:00:00").to_numpy()
    df.insert(0, "annotation_id", _uuids(len(df), 10**9))
    df = df[["annotation_id", "username", "dimension", "level", "polarity", "file_name", "rating",
             "reaction_time_ms", "sample_time_ms", "created_at"]]
    fl = items.sample(n=max(3, int(20 * scale)), random_state=seed)
    flags = pd.DataFrame({"flag_id": [f"f{i}" for i in range(len(fl))], "username": "user_0", **{c: fl[c].to_numpy()
                          for c in ("dimension", "level", "polarity", "file_name")}, "reason": "noise",
                          "created_at": "2026-05-03 10:00:00"})
    return df, _users([f"user_{i}" for i in range(12)]), flags


def write_exports(root: Path, scale: float) -> dict[str, int]:
    """Write annotations/<subset>/… under root; returns row counts."""
    emo, emo_users = emo_export(scale)
    dim, dim_users, flags = dim_export(scale)
    for sub, frames in (("emolia-emo", {"annotations.csv": emo, "users.csv": emo_users}),
                        ("emolia-dim", {"annotations.csv": dim, "users.csv": dim_users, "flags.csv": flags})):
        d = root / "annotations" / sub
        d.mkdir(parents=True, exist_ok=True)
        for name, df in frames.items():
            df.to_csv(d / name, index=False)
    return {"emolia-emo": len(emo), "emolia-dim": len(dim)}


def clip_paths(root: Path, labels_root: Path) -> list[Path]:
    """Where benchmark.py looks for each labelled item's clip under the dataset root ``root``."""
    emo = pd.read_csv(labels_root / "emolia-emo/benchmark_labels.csv", usecols=["file_name"], dtype=str)
    dim = pd.read_csv(labels_root / "emolia-dim/benchmark_labels.csv",
                      usecols=["file_name", "dimension", "level", "polarity"], dtype=str, keep_default_na=False)
    paths = [root / "emolia-emo/data/all" / f for f in emo["file_name"].unique()]
    return paths + [root / "emolia-dim/data" / d / lv / p / f for f, d, lv, p in dim.drop_duplicates().itertuples(index=False)]


def write_placeholder_clips(root: Path, labels_root: Path, size: int = 0, seed: int = 3) -> int:
    """One file per labelled item's clip (sham mode only checks existence); ``size`` random bytes each."""
    rng = np.random.default_rng(seed)
    paths = clip_paths(root, labels_root)
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rng.bytes(size) if size else b"")
    return len(paths)


def synthetic_wave(i: int, rate: int, seconds: float) -> np.ndarray:
    """Clip ``i``: a tone (110–440 Hz) under noise, different for every i, in [-0.5, 0.5]."""
    rng = np.random.default_rng(i)
    t = np.arange(int(rate * seconds)) / rate
    wave = 0.3 * np.sin(2 * np.pi * rng.uniform(110, 440) * t) + 0.1 * rng.standard_normal(len(t))
    return np.clip(wave, -0.5, 0.5).astype(np.float32)


def write_synthetic_audio(paths: list[Path], rate: int = 22_050, seconds: tuple[float, float] = (0.5, 1.5)) -> int:
    """A real audio file at each of ``paths`` (16-bit WAV bytes, whatever the name's extension:
    libsndfile reads the header, not the name), ``rate`` Hz, a length drawn in ``seconds``, so the
    in-process scorer has clips to decode and resample."""
    import io

    import soundfile as sf

    lengths = np.random.default_rng(0).uniform(*seconds, len(paths))
    for i, (p, length) in enumerate(zip(paths, lengths, strict=True)):
        p.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        sf.write(buf, synthetic_wave(i, rate, float(length)), rate, format="WAV", subtype="PCM_16")
        p.write_bytes(buf.getvalue())
    return len(paths)
