"""In-process CLAP scorer: a transformers ``ClapModel`` checkpoint or a sentence-transformers
audio–text model, on CPU or GPU.

similarity = cosine(audio embedding, text embedding), both from the model's projection heads.

* Each unique prompt and each unique clip (by content) is embedded once, not once per row;
  embeddings are cached on disk keyed by the model's fingerprint and the clip's sha256 (or the
  prompt), so a re-run or the other subset re-uses them.
* Scores do not depend on batch size or batch composition: the feature extractor handles each
  clip on its own (repeat-padding to the model's fixed input length), audio is cropped
  deterministically to ``max_seconds`` (its first seconds) before the extractor ever sees it —
  so its random-crop branch never runs — text batches carry attention masks, and the model runs
  in eval mode. Tests assert batch sizes 1 and 8 agree to 1e-5.
* Audio is decoded with soundfile (libsndfile: WAV, FLAC, OGG, MP3) and resampled to the
  model's rate with scipy's polyphase resampler. A clip that cannot be decoded is an error row.

Backends (``backend``): ``transformers`` loads ``ClapModel`` + ``ClapProcessor``;
``sentence-transformers`` loads ``SentenceTransformer`` (v6+, whose ``encode`` takes text and
``{"array", "sampling_rate"}`` audio); ``remote-code`` loads ``AutoModel`` + ``AutoTokenizer``
with the checkpoint's own modelling code (LAION's VoiceCLAP-small and its kind) and uses its
``encode_text`` / ``encode_waveform`` (``get_text_features`` / ``get_audio_features`` when it has
none), each clip zero-padded or cut to the model's fixed window on its own; ``auto`` picks
sentence-transformers for a folder that has a ``modules.json``, remote-code for one whose
``config.json`` has an ``auto_map``, and transformers otherwise. Code from a checkpoint runs only
with ``trust_remote_code`` (``--trust-remote-code``); without it such a checkpoint is refused.

Similarity (``similarity``): ``cosine`` (upstream's) or ``logit`` = scale·cos + bias for a model
trained with a sigmoid (SigLIP) loss, whose learned ``logit_scale`` holds log(scale) and
``logit_bias`` the bias (transformers' ``SiglipModel`` convention): its own decision boundary is
then threshold 0 (p = 0.5). A model without both is refused for ``logit``.

Needs the ``clap`` extra (transformers, sentence-transformers) and a PyTorch build for your
machine; all are imported only when this scorer is chosen.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import time
from collections import Counter
from fractions import Fraction
from pathlib import Path

from ..distributed import Ranks
from ..paths import ClipRefused, read_clip
from . import Scorer, ScoreResult

INSTALL_HINT = ("the in-process CLAP backend needs the 'clap' extra and PyTorch in this project's environment: "
                "uv sync --extra clap, then PyTorch from its own index — CPU: uv pip install torch --index-url "
                "https://download.pytorch.org/whl/cpu; CUDA 12.6: uv pip install torch --index-url "
                "https://download.pytorch.org/whl/cu126")
ST_HINT = "this model needs sentence-transformers in this project's environment: uv pip install \"sentence-transformers>=6\""
BACKENDS = ("auto", "transformers", "sentence-transformers", "remote-code")
SIMILARITIES = ("cosine", "logit")


def require(*modules: str):
    """Import optional dependencies, or stop with exit code 2 naming the extra to install."""
    import importlib

    try:
        return tuple(importlib.import_module(m) for m in modules)
    except ImportError as e:
        from ..errors import InputError

        hint = ST_HINT if (e.name or "").startswith("sentence_transformers") else INSTALL_HINT
        raise InputError("--clap-model", f"{hint} (missing: {e.name})") from None


def device_and_dtype(torch, device: str, dtype: str):
    """``auto`` = cuda when available; dtype by name."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device), {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]


def resolve_backend(model: str, backend: str = "auto") -> str:
    """``auto``: a sentence-transformers folder (it has modules.json) or a transformers checkpoint."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if backend != "auto":
        return backend
    folder = Path(model)
    if (folder / "modules.json").is_file():
        return "sentence-transformers"
    return "remote-code" if "auto_map" in _read_config(folder) else "transformers"


def _read_config(folder: Path) -> dict:
    """The checkpoint's config.json as a dict ({} when there is none or it is not a JSON object)."""
    import json

    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def untrusted(model: str):
    """The bad-input error for a checkpoint whose own code may not run (no --trust-remote-code)."""
    from ..errors import InputError

    return InputError("--clap-model", f"{model} ships its own modelling code (an auto_map in its config); loading it "
                                      "runs that code on this machine, so it needs --trust-remote-code")


def learned_logit(module) -> tuple[float, float] | None:
    """(scale, bias) of a SigLIP-style head: exactly one parameter or buffer named ``logit_scale``
    (holding log(scale)) and one named ``logit_bias`` anywhere in ``module``; None otherwise
    (CLAP's ``logit_scale_a``/``logit_scale_t`` are temperatures without a bias, so no)."""
    import itertools
    import math

    found: dict[str, list] = {"logit_scale": [], "logit_bias": []}
    for name, tensor in itertools.chain(module.named_parameters(), module.named_buffers()):
        last = name.rsplit(".", 1)[-1]
        if last in found and tensor.numel() == 1:
            found[last].append(float(tensor.detach().float().reshape(())))
    if len(found["logit_scale"]) != 1 or len(found["logit_bias"]) != 1:
        return None
    try:
        scale = math.exp(found["logit_scale"][0])
    except OverflowError:  # a log-scale past ~709: no finite scale (similarity_transform refuses it)
        scale = math.inf
    return scale, found["logit_bias"][0]


def similarity_transform(embedder, similarity: str):
    """The function from a cosine to the reported similarity: identity for ``cosine``; for
    ``logit``, cos -> scale·cos + bias with the model's learned (scale, bias), or bad input
    naming the model when it has none."""
    if similarity not in SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}; expected one of {', '.join(SIMILARITIES)}")
    if similarity == "cosine":
        return lambda cos: cos
    params = learned_logit(embedder.torch_module)
    if params is None:
        from ..errors import InputError

        raise InputError("--similarity", f"logit needs a learned logit scale and bias (SigLIP-style 'logit_scale' and "
                                         f"'logit_bias'); {embedder.name} has none: use --similarity cosine")
    scale, bias = params
    if not (math.isfinite(scale) and math.isfinite(bias)):
        from ..errors import InputError

        raise InputError("--similarity", f"logit needs a finite learned scale and bias; {embedder.name} has scale "
                                         f"{scale!r} (exp of its logit_scale) and bias {bias!r}: use --similarity cosine")
    return lambda cos: scale * cos + bias


def decode_audio(data: bytes, target_rate: int, max_seconds: float):
    """Mono float32 at ``target_rate``, cropped to its first ``max_seconds``."""
    import numpy as np
    import soundfile as sf
    from scipy.signal import resample_poly

    wav, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    wav = wav.mean(axis=1)
    if rate != target_rate:
        ratio = Fraction(target_rate, rate)
        wav = resample_poly(wav, ratio.numerator, ratio.denominator).astype(np.float32)
    limit = int(max_seconds * target_rate)
    if len(wav) > limit:
        wav = wav[:limit]
    if len(wav) == 0:
        raise ValueError("the clip has no samples")
    return wav


class AudioPrep:
    """What a decode worker does to one clip, picklable (it travels to worker processes): decode,
    resample and crop (:func:`decode_audio`), then the model's inputs for this clip alone — zero-
    padded or cut to ``window`` samples (``waveforms``), or the checkpoint's feature ``extractor``
    run on the clip by itself, or the waveform as it is (``array``, for a model that prepares its
    own inputs). Each array has a leading axis of 1, so a batch is their concatenation."""

    def __init__(self, rate: int, max_seconds: float, window: int | None = None, extractor=None):
        self.rate, self.max_seconds, self.window, self.extractor = rate, max_seconds, window, extractor
        # the decoders are imported here, in the main process, so forked workers start with them
        # (imported by each worker's first clip instead, they held the model up ~0.9 s a run)
        import scipy.signal  # noqa: F401
        import soundfile  # noqa: F401

    def inputs(self, wave) -> dict:
        import numpy as np

        if self.window is not None:
            fixed = np.zeros((1, self.window), dtype=np.float32)
            fixed[0, :min(len(wave), self.window)] = wave[:self.window]
            return {"waveforms": fixed}
        if self.extractor is not None:
            out = self.extractor([wave], sampling_rate=self.rate, return_tensors="np")
            return {name: np.asarray(value) for name, value in out.items()}
        return {"array": [wave]}

    def __call__(self, data: bytes) -> dict:
        return self.inputs(decode_audio(data, self.rate, self.max_seconds))


def model_fingerprint(model: str) -> str:
    """Identifies the weights: for a local folder, its config and the size, head and tail of
    each weight file (cheap even for GB checkpoints); for a hub id, the id itself."""
    p = Path(model)
    h = hashlib.sha256()
    if p.is_dir():
        for f in sorted(p.iterdir()):
            if f.suffix in (".json", ".safetensors", ".bin", ".txt") and f.is_file():
                h.update(f.name.encode())
                size = f.stat().st_size
                h.update(str(size).encode())
                with open(f, "rb") as fh:
                    h.update(fh.read(1 << 20))
                    if size > 2 << 20:
                        fh.seek(-(1 << 20), os.SEEK_END)
                        h.update(fh.read())
    else:
        h.update(model.encode())
    return h.hexdigest()[:20]


ATTENTIONS = ("auto", "eager", "sdpa")


def attention_kwargs(attention: str) -> dict:
    """``from_pretrained`` keywords for ``attention``: ``auto`` leaves the choice to transformers
    (what every earlier version did), ``eager`` or ``sdpa`` (PyTorch's scaled-dot-product
    attention) ask for it — a checkpoint without it is refused at load."""
    if attention not in ATTENTIONS:
        raise ValueError(f"unknown attention {attention!r}; expected one of {', '.join(ATTENTIONS)}")
    return {} if attention == "auto" else {"attn_implementation": attention}


class Embedder:
    """What every backend shares: ``prep`` (one clip's bytes to inputs, run in decode workers),
    ``to_device`` (a batch's tensors to the model's device, non-blocking from pinned memory) and
    ``audio_vectors`` / ``embed_texts`` (L2-normalised float32 rows). ``embed_audio`` chains them
    for waveforms already decoded (clap_server.py)."""

    torch = None
    device = dtype = None
    prep: AudioPrep

    def to_device(self, inputs: dict) -> dict:
        torch = self.torch
        return {name: (value.to(self.device, dtype=self.dtype if value.is_floating_point() else None, non_blocking=True)
                       if isinstance(value, torch.Tensor) else value) for name, value in inputs.items()}

    def audio_vectors(self, inputs: dict):
        raise NotImplementedError

    def embed_audio(self, waves: list):
        from ..audio_loader import join_inputs

        return self.audio_vectors(self.to_device(join_inputs([self.prep.inputs(w) for w in waves])))

    def _normalised(self, out):
        emb = out if isinstance(out, self.torch.Tensor) else out.pooler_output
        return self.torch.nn.functional.normalize(emb.float(), dim=-1).cpu().numpy()


class ClapEmbedder(Embedder):
    """A transformers ``ClapModel`` checkpoint: each clip through the checkpoint's feature extractor
    on its own (repeat-padding to the fixed input length), a batch through ``get_audio_features``."""

    def __init__(self, model: str, device: str = "auto", dtype: str = "float32", max_seconds: float = 10.0,
                 trust_remote_code: bool = False, attention: str = "auto"):  # (ClapModel is transformers' own code)
        torch, transformers = require("torch", "transformers")
        self.torch = torch
        self.device, self.dtype = device_and_dtype(torch, device, dtype)
        self.processor = transformers.ClapProcessor.from_pretrained(model)
        self.model = transformers.ClapModel.from_pretrained(model, **attention_kwargs(attention)).to(
            self.device, dtype=self.dtype).eval()
        self.torch_module = self.model
        fe = self.processor.feature_extractor
        self.rate = int(fe.sampling_rate)
        # never longer than the extractor's own window, so its random crop can never trigger
        self.max_seconds = min(max_seconds, fe.nb_max_samples / self.rate)
        self.prep = AudioPrep(self.rate, self.max_seconds, extractor=fe)
        self.name = model
        # tokenizers often do not know the text tower's limit; RoBERTa positions start at 2
        positions = getattr(self.model.config.text_config, "max_position_embeddings", 514)
        self.max_tokens = min(int(self.processor.tokenizer.model_max_length), positions - 2)

    def embed_texts(self, texts: list[str]):
        with self.torch.inference_mode():
            inputs = self.processor.tokenizer(texts, padding=True, truncation=True, max_length=self.max_tokens,
                                              return_tensors="pt").to(self.device)
            return self._normalised(self.model.get_text_features(**inputs))

    def audio_vectors(self, inputs: dict):
        with self.torch.inference_mode():
            return self._normalised(self.model.get_audio_features(**inputs))


class SentenceTransformerEmbedder(Embedder):
    """The same interface over a sentence-transformers audio–text model (``encode`` of text and
    of ``{"array", "sampling_rate"}`` dicts, embeddings L2-normalised). Its inputs are prepared by
    ``encode`` itself, in the main process; the workers decode and resample."""

    def __init__(self, model: str, device: str = "auto", dtype: str = "float32", max_seconds: float = 10.0,
                 trust_remote_code: bool = False, attention: str = "auto"):
        torch, st = require("torch", "sentence_transformers")
        self.torch = torch
        self.device, self.dtype = device_and_dtype(torch, device, dtype)
        self.model = st.SentenceTransformer(model, device=str(self.device), trust_remote_code=trust_remote_code,
                                            model_kwargs=attention_kwargs(attention) or None).to(self.dtype).eval()
        self.torch_module = self.model
        modalities = set(getattr(self.model, "modalities", ()) or ())
        if "audio" not in modalities:
            from ..errors import InputError

            raise InputError("--clap-model", f"{model} is a sentence-transformers model without an audio "
                                             f"modality (has: {', '.join(sorted(map(str, modalities))) or 'none'})")
        fe = getattr(getattr(self.model[0], "processor", None), "feature_extractor", None)
        self.rate = int(getattr(fe, "sampling_rate", 16000))
        window = getattr(fe, "nb_max_samples", None)
        self.max_seconds = min(max_seconds, window / self.rate) if window else max_seconds
        self.prep = AudioPrep(self.rate, self.max_seconds)
        self.name = model

    def _encode(self, inputs: list):
        import numpy as np

        with self.torch.inference_mode():
            emb = self.model.encode(inputs, batch_size=max(1, len(inputs)), convert_to_numpy=True,
                                    normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(emb, dtype=np.float32)

    def embed_texts(self, texts: list[str]):
        return self._encode(list(texts))

    def audio_vectors(self, inputs: dict):
        return self._encode([{"array": w, "sampling_rate": self.rate} for w in inputs["array"]])


class RemoteCodeEmbedder(Embedder):
    """A checkpoint with its own modelling code (``AutoModel`` + ``AutoTokenizer``, trusted).

    Text: tokenised with padding and its attention mask, embedded by ``encode_text(input_ids,
    attention_mask)`` (else ``get_text_features``). Audio: each clip's first ``max_seconds``,
    zero-padded or cut *on its own* to the model's fixed window (config ``max_audio_seconds``,
    else ``max_seconds``), then ``encode_waveform`` on the stacked batch — so no clip's embedding
    depends on the others in its batch (upstream pads a batch to its longest clip, unmasked).
    Without ``encode_waveform``, the checkpoint's feature extractor and ``get_audio_features``.
    The sample rate is the feature extractor's or the config's ``sampling_rate``, else 16 kHz.
    Embeddings are L2-normalised here whatever the model returns."""

    def __init__(self, model: str, device: str = "auto", dtype: str = "float32", max_seconds: float = 10.0,
                 trust_remote_code: bool = False, attention: str = "auto"):
        torch, transformers = require("torch", "transformers")
        if not trust_remote_code:
            raise untrusted(model)
        self.torch = torch
        self.device, self.dtype = device_and_dtype(torch, device, dtype)
        self.model = transformers.AutoModel.from_pretrained(model, trust_remote_code=True, **attention_kwargs(attention)).to(
            self.device, dtype=self.dtype).eval()
        self.torch_module = self.model
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(model, trust_remote_code=True)
        try:
            self.feature_extractor = transformers.AutoFeatureExtractor.from_pretrained(model, trust_remote_code=True)
        except (OSError, ValueError, KeyError, TypeError):  # most such checkpoints take raw waveforms
            self.feature_extractor = None
        config = self.model.config
        rate = (getattr(self.feature_extractor, "sampling_rate", None) or getattr(config, "sampling_rate", None)
                or getattr(getattr(config, "audio_config", None), "sampling_rate", None) or 16_000)
        self.rate = int(rate)
        self.window_seconds = float(getattr(config, "max_audio_seconds", None) or max_seconds)
        self.window = int(round(self.window_seconds * self.rate))
        self.max_seconds = min(max_seconds, self.window_seconds)
        self.encodes = hasattr(self.model, "encode_text") and hasattr(self.model, "encode_waveform")
        if not self.encodes and self.feature_extractor is None:
            from ..errors import InputError

            raise InputError("--clap-model", f"{model} has neither encode_text/encode_waveform nor a feature extractor "
                                             "for get_audio_features")
        self.prep = (AudioPrep(self.rate, self.max_seconds, window=self.window) if self.encodes
                     else AudioPrep(self.rate, self.max_seconds, extractor=self.feature_extractor))
        self.name = model

    def embed_texts(self, texts: list[str]):
        with self.torch.inference_mode():
            tokens = self.tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt").to(self.device)
            if self.encodes:
                return self._normalised(self.model.encode_text(input_ids=tokens["input_ids"],
                                                               attention_mask=tokens["attention_mask"]))
            return self._normalised(self.model.get_text_features(**tokens))

    def audio_vectors(self, inputs: dict):
        with self.torch.inference_mode():
            if self.encodes:
                return self._normalised(self.model.encode_waveform(inputs["waveforms"]))
            return self._normalised(self.model.get_audio_features(**inputs))


EMBEDDERS = {"transformers": ClapEmbedder, "sentence-transformers": SentenceTransformerEmbedder,
             "remote-code": RemoteCodeEmbedder}


def is_hub_id(model: str, flag: str) -> bool:
    """Whether ``model`` names a hub checkpoint rather than a local folder; bad input, named by
    ``flag``, for a local folder that does not exist. A path starts with ``.``, ``/`` or ``~``,
    or has more than one ``/`` or a backslash; anything else not on disk is a hub id (``org/name``)."""
    from ..errors import InputError

    if Path(model).expanduser().exists():
        return False
    if model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model:
        raise InputError(flag, f"{model}: folder not found")
    return True


# Seconds the hub gets to answer before a run that needs it stops (the hub library would retry a
# silent connection for minutes, showing a progress bar at 0)
HUB_TIMEOUT = 10.0


def check_hub(model: str, flag: str, timeout: float = HUB_TIMEOUT, endpoint: str | None = None) -> None:
    """For a hub id: nothing when ``HF_HUB_OFFLINE`` is set (the hub library then reads its cache
    alone) or the checkpoint is in the local cache; else one request with ``timeout``. A hub that
    does not answer in time, or has no such model, is bad input named by ``flag``."""
    from huggingface_hub import HfApi, constants, try_to_load_from_cache
    from huggingface_hub.errors import RepositoryNotFoundError

    from ..errors import InputError

    if constants.HF_HUB_OFFLINE or isinstance(try_to_load_from_cache(model, "config.json"), str):
        return
    try:
        HfApi(endpoint=endpoint).model_info(model, timeout=timeout)
    except RepositoryNotFoundError:
        raise InputError(flag, f"no model {model!r} on the Hugging Face hub (or it is private: log in with "
                               "`hf auth login`)") from None
    except Exception as e:  # noqa: BLE001 - a timeout, a refused connection, an HTTP error: whatever the client raises
        raise InputError(flag, f"cannot reach the Hugging Face hub for {model!r} within {timeout:g} s "
                               f"({type(e).__name__}); check the network, pass a downloaded checkpoint's folder, or "
                               "set HF_HUB_OFFLINE=1 to load from the local cache") from None


def load_embedder(model: str, backend: str = "auto", device: str = "auto", dtype: str = "float32",
                  max_seconds: float = 10.0, trust_remote_code: bool = False, flag: str = "--clap-model",
                  attention: str = "auto"):
    """Load a checkpoint with the chosen backend; a checkpoint that cannot be loaded (or that
    lacks the asked-for ``attention``), a folder that does not exist, or one whose own code is
    not trusted is bad input, named by ``flag`` (the option the user gave it with)."""
    from ..errors import InputError

    if is_hub_id(model, flag):
        check_hub(model, flag)
    kind = resolve_backend(model, backend)
    try:
        return EMBEDDERS[kind](model, device, dtype, max_seconds, trust_remote_code, attention)
    except InputError as e:
        raise InputError(flag, e.message, e.row, e.column) from None
    except Exception as e:  # noqa: BLE001 - whatever a loader raises (a bad path, no CUDA…) is one clean error
        raise InputError(flag, f"cannot load {model!r} with the {kind} backend "
                               f"({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})") from None


def batch_plan(count: int, batch_size: int, ranks: Ranks) -> list[list[int]]:
    """This rank's batches of the ``count`` clips to embed: the clips cut, in their planned order,
    into batches of ``batch_size``, and batch j given to rank j mod world. A clip's batch is then
    the same whatever the number of ranks — and a clip's vector moves in its last bits with the
    size of its batch — so the merged vectors, and the predictions, are byte-identical to one
    process's."""
    batches = [list(range(i, min(i + batch_size, count))) for i in range(0, count, batch_size)]
    return batches[ranks.rank::ranks.world]


class ClapScorer(Scorer):
    """The in-process backend. ``decode_workers`` processes decode clips while the model runs
    (:mod:`emolia_bench.audio_loader`); ``ranks`` shares the clips between torchrun's processes:
    every rank reads and hashes a share of the clips, rank 0 plans what is not yet cached (each
    clip's content once) and embeds the prompts, each rank embeds its batches into its own shard
    of the embedding cache (:mod:`emolia_bench.vector_store`), and rank 0, once all have finished,
    reads every shard and returns the similarities (the other ranks return NaN: they only embed).
    ``seconds`` splits the time of a run into decode (the workers' own seconds, summed), wait (the
    model waiting for a batch), transfer, model and cache; ``profile`` synchronises the GPU
    around each phase so the split is true there (it costs the overlap of copy and compute)."""

    mode = "clap"

    def __init__(self, model: str, device: str = "auto", dtype: str = "float32", audio_batch_size: int = 8,
                 text_batch_size: int = 64, max_seconds: float = 10.0, cache_dir: Path | None = None,
                 fresh: bool = False, backend: str = "auto", similarity: str = "cosine", trust_remote_code: bool = False,
                 flag: str = "--clap-model", attention: str = "auto", decode_workers: int = 0,
                 ranks: Ranks | None = None, profile: bool = False):
        from ..errors import InputError

        is_hub_id(model, flag)  # a missing local folder stops the run before anything is scored
        self.model_id, self.device, self.dtype, self.flag = model, device, dtype, flag
        self.backend = resolve_backend(model, backend)
        if self.backend == "remote-code" and not trust_remote_code:  # refused before any work
            raise InputError(flag, untrusted(model).message)
        if similarity not in SIMILARITIES:
            raise ValueError(f"unknown similarity {similarity!r}")
        attention_kwargs(attention)  # an unknown name is a programming error, raised here
        self.similarity, self.trust_remote_code, self.attention = similarity, trust_remote_code, attention
        self.audio_batch_size, self.text_batch_size = max(1, audio_batch_size), max(1, text_batch_size)
        self.max_seconds, self.cache_dir, self.fresh = max_seconds, cache_dir, fresh
        self.decode_workers, self.ranks, self.profile = max(0, decode_workers), ranks or Ranks(), profile
        self.embedder = None
        self.stats = {"texts_embedded": 0, "clips_embedded": 0, "cache_hits": 0}
        self.seconds = dict.fromkeys(("hash", "decode", "wait", "transfer", "model", "cache"), 0.0)
        self.cache_path: Path | None = None  # the embedding cache folder, once a run has opened it

    def summary_line(self) -> str:
        st = self.stats
        return (f"clap ({self.backend}, {self.similarity}): {st['clips_embedded']} clips and {st['texts_embedded']} prompts "
                f"embedded, {st['cache_hits']} clips from the embedding cache ({self.cache_path})")

    def info(self) -> dict:
        # the seconds actually used: a model with a shorter fixed window caps the request
        used = self.embedder.max_seconds if self.embedder is not None else self.max_seconds
        info = {"model": self.model_id, "backend": self.backend, "similarity": self.similarity,
                "max_seconds": float(used), "dtype": self.dtype}
        if self.attention != "auto":
            info["attention"] = self.attention
        return info

    def _embedder(self):
        if self.embedder is None:
            self.embedder = load_embedder(self.model_id, self.backend, self.device, self.dtype, self.max_seconds,
                                          self.trust_remote_code, flag=self.flag, attention=self.attention)
        return self.embedder

    def cache_folder(self) -> Path:
        """One folder per model fingerprint, backend, dtype, window and (when asked for) attention."""
        fp = model_fingerprint(self.model_id)
        tag = f"{fp}-{self.backend}-{self.dtype}-{self.max_seconds:g}" + ("" if self.attention == "auto" else f"-{self.attention}")
        return Path(self.cache_dir or Path(".cache/emolia-bench")) / f"embeddings-{tag}"

    def _timed(self, phase: str, started: float) -> float:
        """Add the seconds since ``started`` to ``phase`` (after the GPU finishes, when profiling)."""
        if self.profile and self.embedder is not None and self.embedder.device.type == "cuda":
            self.embedder.torch.cuda.synchronize(self.embedder.device)
        now = time.perf_counter()
        self.seconds[phase] += now - started
        return now

    def score(self, rows, dataset_root, progress=None) -> ScoreResult:
        import numpy as np

        from ..audio_loader import clip_batches
        from ..vector_store import VectorStore, migrate_jsonl

        require("torch", "sentence_transformers" if self.backend == "sentence-transformers" else "transformers")
        ranks = self.ranks
        # the model's own scale and bias, when asked for: needs the weights even if every embedding is cached
        transform = (lambda cos: cos) if self.similarity == "cosine" else similarity_transform(self._embedder(), "logit")
        n = len(rows)
        sims = np.full(n, np.nan)
        errors: list[str | None] = [None] * n
        folder = self.cache_folder()
        if ranks.is_main and not self.fresh:
            migrate_jsonl(folder.parent / f"{folder.name}.jsonl", folder)
        ranks.barrier()  # the migrated shard exists before any rank reads the folder
        store = VectorStore(folder, writer=ranks.rank, fresh=self.fresh)
        self.cache_path = folder
        try:
            paths = rows["audio_path"].tolist()
            # texts: each unique prompt once, by rank 0 (a run has a few hundred at most)
            prompts = sorted(set(rows["prompt"]))
            text_key = {p: "t:" + hashlib.sha256(p.encode()).hexdigest() for p in prompts}
            if ranks.is_main:
                todo = [p for p in prompts if store.get(text_key[p]) is None]
                for i in range(0, len(todo), self.text_batch_size):
                    batch = todo[i:i + self.text_batch_size]
                    store.put_many([text_key[p] for p in batch], self._embedder().embed_texts(batch))
                    self.stats["texts_embedded"] += len(batch)
            # clips: each rank reads and hashes a share of them; every rank then knows every key
            started = time.perf_counter()
            unique = sorted(set(paths))
            clip_key: dict[str, str] = {}
            key_error: dict[str, str] = {}  # the error of every clip that has no vector, by key
            for keys, refused in ranks.gather(hash_clips(unique[ranks.rank::ranks.world], Path(dataset_root))):
                clip_key.update(keys)
                key_error.update(refused)
            self._timed("hash", started)
            # rank 0 plans: each content not yet cached, once, in path order (one process's order)
            jobs: list[tuple[str, str]] = []
            if ranks.is_main:
                planned = set()
                for rel in unique:
                    key = clip_key[rel]
                    if key in key_error or key in planned or store.get(key) is not None:
                        self.stats["cache_hits"] += key not in key_error
                        continue
                    planned.add(key)
                    jobs.append((key, rel))
            jobs = ranks.broadcast(jobs)
            rows_of = Counter(clip_key[rel] for rel in paths)
            counted: set[str] = set()  # clips whose rows the progress bar has counted
            embedded_here = 0  # by this rank, in this call
            if jobs:
                mine = batch_plan(len(jobs), self.audio_batch_size, ranks)
                embedder = self._embedder()
                batches = clip_batches(jobs, mine, Path(dataset_root), embedder.prep, self.decode_workers,
                                       pin_memory=embedder.device.type == "cuda")
                started = time.perf_counter()
                for batch in batches:
                    started = self._timed("wait", started)
                    self.seconds["decode"] += batch["decode_seconds"]
                    key_error.update(batch["errors"])
                    if batch["keys"]:
                        inputs = embedder.to_device(batch["inputs"])
                        started = self._timed("transfer", started)
                        vectors = embedder.audio_vectors(inputs)
                        started = self._timed("model", started)
                        store.put_many(batch["keys"], vectors)
                        embedded_here += len(batch["keys"])
                        started = self._timed("cache", started)
                    if progress is not None and ranks.is_main:
                        finished = [*batch["keys"], *batch["errors"]]
                        progress.update(sum(rows_of[k] for k in finished))
                        counted.update(finished)
                    started = time.perf_counter()
            # every rank's decode errors and counts, then every rank's vectors, reach rank 0
            for errs, count in ranks.gather((key_error, embedded_here)):
                key_error.update(errs)
                self.stats["clips_embedded"] += count
            ranks.barrier()
            if not ranks.is_main:
                return ScoreResult(similarity=sims, error=errors)
            if ranks.world > 1:
                store.reload()
            for row, (rel, prompt) in enumerate(zip(paths, rows["prompt"], strict=True)):
                key = clip_key[rel]
                audio, text = store.get(key), store.get(text_key[prompt])
                if key in key_error:
                    errors[row] = key_error[key]
                elif audio is None or text is None:  # another rank could not write its shard (it said so)
                    errors[row] = "embedding_unsaved: its rank could not write the embedding cache; re-run to embed it"
                else:
                    value = transform(float(np.dot(audio.astype(np.float64), text.astype(np.float64))))
                    if math.isfinite(value):
                        sims[row] = value
                    else:
                        errors[row] = "non-finite similarity"
                if progress is not None and key not in counted:
                    progress.update(1)
        finally:
            store.close()
        return ScoreResult(similarity=sims, error=errors)


def hash_clips(rels: list[str], dataset_root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Each clip's cache key, ``a:<sha256 of its bytes>`` (``missing:<rel>`` for a clip that
    cannot be read), and the error of each such key."""
    keys, refused = {}, {}
    for rel in rels:
        try:
            keys[rel] = "a:" + hashlib.sha256(read_clip(dataset_root, rel)).hexdigest()
        except ClipRefused as e:
            keys[rel] = "missing:" + rel
            refused[keys[rel]] = str(e)
    return keys, refused
