"""Named models: ``--model voiceclap-small`` and friends resolve to a hub id, a backend and the
defaults their authors evaluate with (LAION's VoiceCLAP model cards and inference guide).

* ``voiceclap-small`` (and ``-v2``): a transformers ``AutoModel`` with its own modelling code
  (``encode_text``, ``encode_waveform``), mono 16 kHz in a fixed 30 s window -> the
  ``remote-code`` backend, which needs ``trust_remote_code``.
* ``voiceclap-large`` (and ``-v2``): a sentence-transformers model (Qwen2.5-Omni based), audio as
  ``{"array", "sampling_rate": 16000}``, 30 s -> the ``sentence-transformers`` backend.

Every preset implies ``--trust-remote-code`` (they are LAION's own repositories, named here on
purpose); the scripts print that they do. Their 16 kHz needs no setting: the backends read the
rate from the checkpoint and fall back to 16 kHz. Importable without numpy or torch (``--help``
lists them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    model_id: str
    backend: str
    max_seconds: float = 30.0
    trust_remote_code: bool = True


PRESETS: dict[str, Preset] = {
    "voiceclap-small": Preset("laion/voiceclap-small", "remote-code"),
    "voiceclap-small-v2": Preset("laion/voiceclap-small-v2", "remote-code"),
    "voiceclap-large": Preset("laion/voiceclap-large", "sentence-transformers"),
    "voiceclap-large-v2": Preset("laion/voiceclap-large-v2", "sentence-transformers"),
}

#: the clip length used when neither a preset nor --clap-max-seconds says otherwise
DEFAULT_MAX_SECONDS = 10.0


@dataclass(frozen=True)
class ModelChoice:
    """What to load and how: the checkpoint (a folder or hub id), the backend, the clip window in
    seconds, whether its own code may run, and a line to print about what a preset implied."""

    model: str
    backend: str
    max_seconds: float
    trust_remote_code: bool
    note: str | None = None


def resolve_model(preset: str | None, checkpoint: str | None, backend: str = "auto",
                  max_seconds: float | None = None, trust_remote_code: bool = False) -> ModelChoice:
    """A preset (``--model``), optionally with a local ``checkpoint`` folder standing in for its
    hub id, or a plain checkpoint (``--clap-model``). Options given explicitly win over the
    preset's defaults. Raises ValueError for an unknown preset or neither argument."""
    if preset is None:
        if checkpoint is None:
            raise ValueError("name a model: a preset or a checkpoint")
        return ModelChoice(str(checkpoint), backend, max_seconds or DEFAULT_MAX_SECONDS, trust_remote_code)
    if preset not in PRESETS:
        raise ValueError(f"unknown model preset {preset!r}; expected one of {', '.join(PRESETS)}")
    p = PRESETS[preset]
    model = str(checkpoint) if checkpoint is not None else p.model_id
    trust = trust_remote_code or p.trust_remote_code
    note = None
    if p.trust_remote_code and not trust_remote_code:
        note = (f"{preset}: loading {model} with trust_remote_code (the preset implies --trust-remote-code: "
                "code from the checkpoint runs on this machine)")
    return ModelChoice(model, p.backend if backend == "auto" else backend, max_seconds or p.max_seconds, trust, note)


def add_loading_options(group, backend_flag: str) -> None:
    """The options that say how a model is loaded and what it reports — the same in
    benchmark.py (``--clap-backend``) and clap_server.py (``--backend``)."""
    group.add_argument(backend_flag, default="auto", choices=["auto", "transformers", "sentence-transformers", "remote-code"],
                       help="how to load the model (default: auto = the preset's; sentence-transformers for a folder with "
                            "modules.json, remote-code for one whose config.json has an auto_map, else transformers)")
    group.add_argument("--trust-remote-code", action="store_true",
                       help="allow a checkpoint's own modelling code to run on this machine (remote-code checkpoints need "
                            "it; presets imply it)")
    group.add_argument("--attention", default="auto", choices=["auto", "eager", "sdpa"],
                       help="the model's attention: auto (default) = transformers' choice for the checkpoint; sdpa = "
                            "PyTorch's scaled-dot-product attention, where the checkpoint has it (else refused); eager")
    group.add_argument("--similarity", default="cosine", choices=["cosine", "logit"],
                       help="cosine (default, as upstream) or logit = the model's learned scale*cos + bias (SigLIP-trained "
                            "models: then threshold 0 is p = 0.5)")
