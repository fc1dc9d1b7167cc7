"""Generate the committed demo: raw exports with fake names, their anonymized form, a short dim
rubric and a real, decodable MP3 clip for every demo item.

    uv run scripts/make_demo.py          # rewrites examples/, annotations/ and dataset/

Everything is derived from one seed, so re-running it reproduces the same bytes. The
structure mirrors the real exports at a small size:

* emolia-emo: 60 clips × 5 task types = 300 items, 3 raters, a few re-ratings (the later vote
  wins), one item with a single rater and one with two.
* emolia-dim: a sparse panel of 5 raters, 1–4 raters per item, word levels for LANG, a
  dimension missing from the rubric (fallback prompt) and an empty rubric level, flags on
  labelled items and one on an item nobody rated.

Clips are 16 kHz mono, 1–2 s: tones, pitch glides, noise bursts, amplitude-modulated tones and
chords, each with its own parameters.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf

from emolia_bench.anonymize import MAP_FILE, anonymize_subset, load_raw
from emolia_bench.outputs import csv_bytes, write_outputs
from emolia_bench.subsets import DIM, EMO

ROOT = Path(__file__).resolve().parents[1]
SEED = 20260401
SR = 16_000

EMOTIONS = [
    "Amusement", "Anger", "Sadness", "Fear", "Awe", "Contentment", "Jealousy___Envy",
    "Astonishment_Surprise", "Pride", "Relief", "Fatigue_Exhaustion", "Hope_Enthusiasm_Optimism",
]
EMO_RATERS = ["Mira Kovac", "j.okafor", "Lena Brandt"]
DIM_RATERS = ["tomasz_w", "Priya N", "Sam Ortiz", "mira.k", "Ana-Lucia Reyes"]
DIMENSIONS = {
    "TEMP": [str(i) for i in range(7)],
    "VOLT": [str(i) for i in range(7)],
    "PTCH": [str(i) for i in range(7)],
    "AROU": [str(i) for i in range(7)],
    "LANG": ["Americas", "Asian_Pacific", "European", "Middle_Eastern_African"],
    "BKGN": [str(i) for i in range(7)],  # deliberately absent from the rubric
}
P_PRESENT = {"affirmative": 0.8, "contrastive_1": 0.4, "contrastive_2": 0.3, "penultimate": 0.25, "ultimate": 0.15}


# ---------------------------------------------------------------------------------------------
# audio


def synth_clip(rng: np.random.Generator, kind: int) -> np.ndarray:
    dur = rng.uniform(1.0, 2.0)
    t = np.arange(int(dur * SR)) / SR
    f0 = rng.uniform(110, 600)
    if kind == 0:  # steady tone with a harmonic
        x = np.sin(2 * np.pi * f0 * t) + 0.3 * np.sin(4 * np.pi * f0 * t)
    elif kind == 1:  # pitch glide
        f1 = rng.uniform(110, 900)
        phase = 2 * np.pi * (f0 * t + (f1 - f0) * t**2 / (2 * dur))
        x = np.sin(phase)
    elif kind == 2:  # low-passed noise burst
        noise = rng.standard_normal(len(t))
        k = int(rng.integers(3, 30))
        x = np.convolve(noise, np.ones(k) / k, mode="same") * 3
    elif kind == 3:  # amplitude-modulated tone
        x = np.sin(2 * np.pi * f0 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * rng.uniform(2, 9) * t))
    else:  # two-tone chord
        x = np.sin(2 * np.pi * f0 * t) + np.sin(2 * np.pi * f0 * rng.uniform(1.2, 1.6) * t)
    env = np.minimum(1, np.minimum(t, t[-1] - t) / 0.05)  # 50 ms fades, no clicks
    x = x * env
    return (0.4 * x / max(np.abs(x).max(), 1e-9)).astype(np.float32)


def mp3_bytes(x: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, x, SR, format="MP3")
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# annotations


def timestamps(start: datetime, n: int, rng: np.random.Generator) -> list[str]:
    steps = rng.integers(3, 40, size=n).cumsum()
    return [(start + timedelta(seconds=int(s))).strftime("%Y-%m-%d %H:%M:%S") for s in steps]


def uuid_like(rng: np.random.Generator, n: int) -> list[str]:
    raw = rng.integers(0, 16, size=(n, 32))
    hexs = ["".join("0123456789abcdef"[d] for d in row) for row in raw]
    return [f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}" for h in hexs]


def users_frame(names: list[str], rng: np.random.Generator, columns: tuple[str, ...], count: dict) -> pd.DataFrame:
    genders = ["Female", "Male", "Female", "Non-binary", "Male"]
    setups = ["Headphones (over-ear)", "Earbuds (wireless/ANC)", "External speakers"]
    langs = ["English,German", "English,Spanish", "English,Hindi", "English", "Spanish,English,French"]
    rows = []
    for i, name in enumerate(names):
        rows.append({
            "username": name, "is_active": "1", "is_admin": "0", "onboarded": "True",
            "annotation_count": str(count.get(name, 0)),
            "created_at": f"2026-03-{10 + i:02d}T09:{10 + i:02d}:00.000Z",
            "age": str(int(rng.integers(22, 55))), "languages": langs[i % len(langs)],
            "gender": genders[i % len(genders)], "consent": "True",
            "degree": ["MSc Psychology", "BA Linguistics", "PhD Phonetics"][i % 3],
            "expertise": str(int(rng.integers(1, 7))), "listening_setup": setups[i % len(setups)],
        })
    return pd.DataFrame(rows)[list(columns)]


def make_emo(rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, bytes]]:
    clips, rows = {}, []
    for c in range(60):
        source = EMOTIONS[c % len(EMOTIONS)]
        file_name = f"EN_D{c:05d}_S{int(rng.integers(10000, 99999))}_W{c % 7:06d}.mp3"
        clips[f"emolia-emo/data/{source}/{file_name}"] = synth_clip(rng, c % 5)
        others = [e for e in EMOTIONS if e != source]
        queried = [source, *rng.choice(others, size=4, replace=False)]
        for task, q in zip(P_PRESENT, queried, strict=True):
            for r, rater in enumerate(EMO_RATERS):
                p = np.clip(P_PRESENT[task] + (r - 1) * 0.08, 0.02, 0.98)
                present = rng.random() < p
                rating = ("strongly_present" if rng.random() < 0.55 else "weakly_present") if present else "not_present"
                rows.append([rater, source, q, task, file_name, rating])
    df = pd.DataFrame(rows, columns=["username", "source_emotion", "queried_emotion", "task_type", "file_name", "rating"])
    # one item keeps a single rater, one keeps two
    drop = df.index[((df["file_name"] == df["file_name"].iloc[0]) & (df["task_type"] == "ultimate") & (df["username"] != EMO_RATERS[0]))
                    | ((df["file_name"] == df["file_name"].iloc[5]) & (df["task_type"] == "penultimate") & (df["username"] == EMO_RATERS[2]))]
    df = df.drop(drop).reset_index(drop=True)
    n = len(df)
    df["reaction_time_ms"] = rng.integers(900, 15000, size=n).astype(str)
    df["sample_time_ms"] = rng.integers(2000, 20000, size=n).astype(str)
    df["created_at"] = timestamps(datetime(2026, 4, 1, 9, 0, 0), n, rng)
    # re-ratings: an earlier vote on the same item by the same rater, later superseded
    rerate = df.sample(5, random_state=int(rng.integers(1 << 31))).copy()
    rerate["rating"] = rerate["rating"].map({"not_present": "strongly_present", "weakly_present": "not_present",
                                             "strongly_present": "not_present"})
    rerate["created_at"] = [(datetime.fromisoformat(t) - timedelta(minutes=30)).strftime("%Y-%m-%d %H:%M:%S")
                            for t in rerate["created_at"]]
    df = pd.concat([df, rerate], ignore_index=True)
    df.insert(0, "annotation_id", uuid_like(rng, len(df)))
    df = df[list(EMO.annotation_columns)]
    df = df[["annotation_id", "username", "source_emotion", "queried_emotion", "task_type", "file_name", "rating",
             "reaction_time_ms", "sample_time_ms", "created_at"]]
    users = users_frame(EMO_RATERS, rng, ("username", "is_active", "is_admin", "onboarded", "annotation_count",
                                          "created_at", "age", "languages", "gender", "consent", "degree", "expertise",
                                          "listening_setup"), df["username"].value_counts().to_dict())
    return df, users, {k: mp3_bytes(v) for k, v in clips.items()}


def make_dim(rng: np.random.Generator):
    items = set()
    dims = list(DIMENSIONS)
    while len(items) < 240:
        d = dims[int(rng.integers(len(dims)))]
        level = DIMENSIONS[d][int(rng.integers(len(DIMENSIONS[d])))]
        items.add((f"sample_{int(rng.integers(0, 12)):02d}.mp3", d, level, ["positive", "negative"][int(rng.integers(2))]))
    items = sorted(items)
    rows, clips = [], {}
    for k, (file_name, d, level, pol) in enumerate(items):
        clips[f"emolia-dim/data/{d}/{level}/{pol}/{file_name}"] = synth_clip(rng, k % 5)
        n_raters = int(rng.choice([1, 2, 3, 4], p=[0.55, 0.25, 0.15, 0.05]))
        for rater in rng.choice(DIM_RATERS, size=n_raters, replace=False):
            p = 0.72 if pol == "positive" else 0.3
            rows.append([rater, d, level, pol, file_name, "yes" if rng.random() < p else "no"])
    df = pd.DataFrame(rows, columns=["username", "dimension", "level", "polarity", "file_name", "rating"])
    n = len(df)
    df["reaction_time_ms"] = rng.integers(900, 15000, size=n).astype(str)
    df["sample_time_ms"] = rng.integers(2000, 20000, size=n).astype(str)
    df["created_at"] = timestamps(datetime(2026, 5, 2, 9, 0, 0), n, rng)
    df.insert(0, "annotation_id", uuid_like(rng, n))
    df = df[["annotation_id", "username", "dimension", "level", "polarity", "file_name", "rating",
             "reaction_time_ms", "sample_time_ms", "created_at"]]
    users = users_frame(DIM_RATERS, rng, ("username", "is_active", "is_admin", "onboarded", "annotation_count",
                                          "created_at", "age", "gender", "languages", "listening_setup", "degree",
                                          "expertise", "consent"), df["username"].value_counts().to_dict())
    flagged = [items[3], items[40], items[101]]
    reasons = ["only music", "two speakers talk over each other", "silence for most of the clip"]
    flag_rows = [[f"f{i:07d}-0000-4000-8000-{i:012d}", DIM_RATERS[i % len(DIM_RATERS)], d, lv, pol, fn, reason,
                  f"2026-05-03 1{i}:00:00"] for i, ((fn, d, lv, pol), reason) in enumerate(zip(flagged, reasons, strict=True))]
    # a flag on an item nobody rated, by someone who never rated anything
    flag_rows.append(["f0000099-0000-4000-8000-000000000099", "Quinn Harlow", "VOLT", "6", "positive", "sample_99.mp3",
                      "clip is empty", "2026-05-03 18:00:00"])
    flags = pd.DataFrame(flag_rows, columns=["flag_id", "username", "dimension", "level", "polarity", "file_name",
                                             "reason", "created_at"])
    return df, users, flags, {k: mp3_bytes(v) for k, v in clips.items()}


RUBRIC = {
    "TEMP": {"short_description": "Tempo", "long_description": "How fast the speaker produces syllables.",
             "levels": {"0": "Extremely slow speech, each syllable drawn out.", "1": "Very slow, deliberate speech.",
                        "2": "Slow, unhurried speech.", "3": "Speech at an ordinary conversational pace.",
                        "4": "Somewhat brisk speech.", "5": "Fast speech with little space between words.",
                        "6": "Extremely rapid speech, syllables running together."}},
    "VOLT": {"short_description": "Volume", "long_description": "How loud the voice is.",
             "levels": {"0": "A barely audible whisper.", "1": "Very quiet speech.", "2": "Quiet, soft speech.",
                        "3": "Speech at a normal speaking volume.", "4": "Raised, projected voice.",
                        "5": "Loud speech, close to calling out.", "6": "Shouting at full volume."}},
    "PTCH": {"short_description": "Pitch", "long_description": "How high the voice sits.",
             "levels": {"0": "A very deep, low voice.", "1": "A low voice.", "2": "A somewhat low voice.",
                        "3": "A voice of middling pitch.", "4": "A somewhat high voice.", "5": "A high voice.",
                        "6": "A very high, shrill voice."}},
    "AROU": {"short_description": "Arousal", "long_description": "How activated or energetic the speaker sounds.",
             "levels": {"0": "Drowsy, drained of energy.", "1": "Calm and low in energy.", "2": "Relaxed.",
                        "3": "Neutral energy.", "4": "Alert and engaged.", "5": "Excited and energetic.",
                        "6": "Highly agitated, at the peak of activation."}},
    "LANG": {"short_description": "Language region", "long_description": "Which region's languages the speech belongs to.",
             "levels": {"Americas": "Speech in a language of the Americas.",
                        "Asian_Pacific": "Speech in an Asian or Pacific language.",
                        "European": "Speech in a European language.",
                        "Middle_Eastern_African": ""}},  # empty on purpose: the fallback prompt is used
    "ACNT": {"short_description": "Accent strength", "long_description": "Never annotated; present to show that unused rubric entries are harmless.",
             "levels": {"0": "No accent.", "6": "A very strong accent."}},
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="repository root to write examples/, annotations/ and dataset/ into (default: this repo)")
    root = parser.parse_args(argv).root
    rng = np.random.default_rng(SEED)
    emo, emo_users, emo_clips = make_emo(rng)
    dim, dim_users, flags, dim_clips = make_dim(rng)

    raw = root / "examples" / "annotations_raw"
    for sub in ("emolia-emo", "emolia-dim"):
        shutil.rmtree(root / "dataset" / sub / "data", ignore_errors=True)
        (raw / sub / MAP_FILE).unlink(missing_ok=True)  # a fresh first run: sorted ids
    write_outputs(raw / "emolia-emo", {"annotations.csv": csv_bytes(emo), "users.csv": csv_bytes(emo_users)})
    write_outputs(raw / "emolia-dim", {"annotations.csv": csv_bytes(dim), "users.csv": csv_bytes(dim_users),
                                       "flags.csv": csv_bytes(flags)})
    for subset in (EMO, DIM):
        result = anonymize_subset(raw / subset.name, subset, load_raw(raw / subset.name, subset))
        write_outputs(root / "annotations" / subset.name, result.files)
        write_outputs(raw / subset.name, {MAP_FILE: csv_bytes(result.mapping)})
    write_outputs(root / "dataset", {**emo_clips, **dim_clips,
                                     "emolia-dim/variables.json": (json.dumps(RUBRIC, indent=2) + "\n").encode()})
    total = sum(len(b) for b in {**emo_clips, **dim_clips}.values())
    print(f"emolia-emo: {len(emo)} rows, {len(emo_clips)} clips; emolia-dim: {len(dim)} rows, {len(dim_clips)} clips, "
          f"{len(flags)} flags; audio {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
