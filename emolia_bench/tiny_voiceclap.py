"""A tiny VoiceCLAP-shaped model whose modelling code ships with the checkpoint.

``tiny_clap.build_tiny_voiceclap`` saves it with this file and an ``auto_map`` in its config, so
``AutoModel.from_pretrained(folder, trust_remote_code=True)`` loads it the way LAION's
``voiceclap-small`` loads: custom code, ``encode_text(input_ids, attention_mask)`` and
``encode_waveform(waveforms)`` returning L2-normalised vectors, a fixed audio window, and a
SigLIP-style learned ``logit_scale`` (holding log(scale)) and ``logit_bias``. Its weights are
random; the tests and the demo use it to drive the remote-code backend without a download.

Text: token embeddings averaged under the attention mask, then projected. Audio: the waveform
cut into 400-sample frames, each frame projected, averaged, projected again. Needs PyTorch.

Two options serve the GPU pipeline's tests and bench/bench_gpu.py: ``attention_heads`` > 0 adds
one self-attention layer over the frames, run eagerly or with PyTorch's scaled-dot-product
attention as transformers' ``attn_implementation`` says (so ``--attention sdpa`` has something to
change); ``seconds_per_batch`` makes every ``encode_waveform`` call take at least that long — a
stand-in for a large model's fixed cost per batch, so the overlap of decoding with the model can
be measured without a GPU. Both default to off (the model of earlier versions, same weights).
"""

import time

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel


class TinyVoiceClapConfig(PretrainedConfig):
    model_type = "tiny_voiceclap"

    def __init__(self, vocab_size: int = 320, hidden_size: int = 32, projection_dim: int = 16,
                 frame_size: int = 400, sampling_rate: int = 16_000, max_audio_seconds: float = 2.0,
                 logit_scale_init: float = 2.302585, logit_bias_init: float = -1.5, attention_heads: int = 0,
                 seconds_per_batch: float = 0.0, **kwargs):
        self.vocab_size, self.hidden_size, self.projection_dim = vocab_size, hidden_size, projection_dim
        self.frame_size, self.sampling_rate, self.max_audio_seconds = frame_size, sampling_rate, max_audio_seconds
        self.logit_scale_init, self.logit_bias_init = logit_scale_init, logit_bias_init
        self.attention_heads, self.seconds_per_batch = attention_heads, seconds_per_batch
        super().__init__(**kwargs)


class TinyVoiceClapModel(PreTrainedModel):
    config_class = TinyVoiceClapConfig
    _supports_sdpa = True

    def __init__(self, config: TinyVoiceClapConfig):
        super().__init__(config)
        self.token_embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.text_projection = nn.Linear(config.hidden_size, config.projection_dim)
        self.frame_projection = nn.Linear(config.frame_size, config.hidden_size)
        self.audio_projection = nn.Linear(config.hidden_size, config.projection_dim)
        self.logit_scale = nn.Parameter(torch.tensor(float(config.logit_scale_init)))
        self.logit_bias = nn.Parameter(torch.tensor(float(config.logit_bias_init)))
        if config.attention_heads:  # created last, so the layers above keep the weights of a model without it
            self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.post_init()

    def _init_weights(self, module):
        pass  # torch's own initialisation, seeded by the builder

    def encode_text(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        mask = attention_mask.unsqueeze(-1).to(self.token_embedding.weight.dtype)
        pooled = (self.token_embedding(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return nn.functional.normalize(self.text_projection(torch.tanh(pooled)), dim=-1)

    def encode_waveform(self, waveforms):
        frame = self.config.frame_size
        remainder = waveforms.shape[1] % frame
        if remainder:
            waveforms = nn.functional.pad(waveforms, (0, frame - remainder))
        frames = waveforms.reshape(waveforms.shape[0], -1, frame).to(self.frame_projection.weight.dtype)
        hidden = nn.functional.gelu(self.frame_projection(frames * 10.0))
        if self.config.attention_heads:
            hidden = hidden + self.self_attention(hidden)
        if self.config.seconds_per_batch:
            time.sleep(self.config.seconds_per_batch)
        return nn.functional.normalize(self.audio_projection(hidden.mean(1)), dim=-1)

    def self_attention(self, hidden):
        """Multi-head self-attention over the frames: eager (softmax(q·kᵀ/√d)·v, written out) or
        PyTorch's fused scaled_dot_product_attention, as the config's attn_implementation says."""
        batch, length, width = hidden.shape
        heads = self.config.attention_heads
        q, k, v = (t.reshape(batch, length, heads, width // heads).transpose(1, 2)
                   for t in self.qkv(hidden).chunk(3, dim=-1))
        if self.config._attn_implementation == "sdpa":
            out = nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            weights = torch.softmax(q @ k.transpose(-1, -2) / (width // heads) ** 0.5, dim=-1)
            out = weights @ v
        return out.transpose(1, 2).reshape(batch, length, width)

    def forward(self, input_ids, attention_mask, waveforms):
        """SigLIP logits: scale * cos + bias, audio x text."""
        cos = self.encode_waveform(waveforms) @ self.encode_text(input_ids, attention_mask).T
        return cos * self.logit_scale.exp() + self.logit_bias
