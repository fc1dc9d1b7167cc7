"""Tiny, randomly initialised CLAP checkpoints, built locally (no download).

The tests, the demo and ``bench/bench_clap.py`` use it to drive the real in-process and server
code paths (tokenizer, feature extractor, HTSAT audio tower, RoBERTa text tower, projections)
without fetching weights: this machine and CI reach no model hub. Its scores are meaningless;
what they prove is the plumbing.

    uv run python -m emolia_bench.tiny_clap OUT_DIR [--sentence-transformers ST_DIR] [--remote-code RC_DIR]

``--remote-code`` also writes a VoiceCLAP-shaped model whose modelling code ships with the
checkpoint (``tiny_voiceclap.py`` + ``auto_map``), loaded only with ``--trust-remote-code``.

Needs the ``clap`` extra and PyTorch (and sentence-transformers for ``--sentence-transformers``).
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

# Text the byte-level BPE tokenizer is trained on; any text still tokenizes (byte fallback).
CORPUS = [
    "Speech audio in which the speaker expresses or conveys Awe.",
    "Speech audio matching the description of TEMP at level 3.",
    "A slow, calm voice with long pauses between phrases.",
    "Fast speech with a high, bright pitch / loud and tense.",
]
SAMPLING_RATE = 16_000


def tiny_tokenizer(out_dir: Path):
    """A 320-token byte-level BPE tokenizer trained on ``CORPUS`` (its files under ``out_dir/_tokenizer``)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaTokenizerFast

    tok_dir = Path(out_dir) / "_tokenizer"
    tok_dir.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS * 4, vocab_size=320, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    bpe.save_model(str(tok_dir))
    # from the folder: transformers 5 ignores vocab_file/merges_file given to the constructor and
    # leaves only the 5 special tokens (every text became the same two ids)
    tokenizer = RobertaTokenizerFast.from_pretrained(str(tok_dir), model_max_length=64)
    assert len(tokenizer) == 320, len(tokenizer)
    return tokenizer


def build_tiny_voiceclap(out_dir: Path, *, seed: int = 0, attention_heads: int = 0, seconds_per_batch: float = 0.0,
                         max_audio_seconds: float = 2.0) -> Path:
    """Write the tiny remote-code model of :mod:`tiny_voiceclap` and its tokenizer to ``out_dir``:
    ``config.json`` carries an ``auto_map`` and the folder holds ``tiny_voiceclap.py``, so only
    ``trust_remote_code`` loads it. Deterministic for a given seed. ``attention_heads`` and
    ``seconds_per_batch``: see :mod:`tiny_voiceclap` (0: off)."""
    import torch

    from .tiny_voiceclap import TinyVoiceClapConfig, TinyVoiceClapModel

    out_dir = Path(out_dir)
    tokenizer = tiny_tokenizer(out_dir)
    TinyVoiceClapConfig.register_for_auto_class()
    TinyVoiceClapModel.register_for_auto_class("AutoModel")
    torch.manual_seed(seed)
    model = TinyVoiceClapModel(TinyVoiceClapConfig(vocab_size=len(tokenizer), sampling_rate=SAMPLING_RATE,
                                                   attention_heads=attention_heads, seconds_per_batch=seconds_per_batch,
                                                   max_audio_seconds=max_audio_seconds)).eval()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def build_tiny_clap(out_dir: Path, *, seed: int = 0, st_dir: Path | None = None) -> Path:
    """Write a ``ClapModel`` + ``ClapProcessor`` to ``out_dir`` (and, optionally, the same model
    in sentence-transformers format to ``st_dir``). Deterministic for a given seed."""
    import torch
    from transformers import (
        ClapConfig,
        ClapFeatureExtractor,
        ClapModel,
        ClapProcessor,
    )

    out_dir = Path(out_dir)
    tokenizer = tiny_tokenizer(out_dir)
    # 2-second window, 16 mel bins; "rand_trunc" with clips never longer than the window means the
    # extractor only ever repeat-pads (its random crop needs a longer clip, which we never pass).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "a mel filter has all zero values": harmless at 16 bins
        extractor = ClapFeatureExtractor(feature_size=16, sampling_rate=SAMPLING_RATE, hop_length=160, max_length_s=2,
                                         fft_window_size=400, padding="repeatpad", truncation="rand_trunc")
    processor = ClapProcessor(feature_extractor=extractor, tokenizer=tokenizer)
    config = ClapConfig(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=37, max_position_embeddings=70, projection_dim=16),
        audio_config=dict(spec_size=64, num_mel_bins=16, window_size=4, patch_size=4, patch_stride=[4, 4],
                          hidden_size=32, depths=[1, 1], num_attention_heads=[2, 2], enable_fusion=False,
                          projection_dim=16, patch_embeds_hidden_size=16),
        projection_dim=16,
    )
    torch.manual_seed(seed)
    model = ClapModel(config).eval()
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    if st_dir is not None:
        from sentence_transformers import SentenceTransformer

        SentenceTransformer(str(out_dir), device="cpu").save(str(st_dir))
    return out_dir


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir", type=Path, help="folder for the transformers checkpoint")
    p.add_argument("--sentence-transformers", type=Path, metavar="ST_DIR", help="also save it in sentence-transformers format")
    p.add_argument("--remote-code", type=Path, metavar="RC_DIR", help="also write the tiny remote-code (VoiceCLAP-shaped) model")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    build_tiny_clap(args.out_dir, seed=args.seed, st_dir=args.sentence_transformers)
    if args.remote_code:
        build_tiny_voiceclap(args.remote_code, seed=args.seed)
    print(f"tiny CLAP checkpoint in {args.out_dir}" + (f" and {args.sentence_transformers}" if args.sentence_transformers else "")
          + (f"; tiny remote-code model in {args.remote_code}" if args.remote_code else ""))


if __name__ == "__main__":
    main()
