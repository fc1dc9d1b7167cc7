"""Serve a CLAP checkpoint over HTTP, behind the same contract as the sham server.

    uv run clap_server.py --model path/to/clap-checkpoint --port 8765
    uv run benchmark.py --endpoint http://127.0.0.1:8765/v1/similarity --model-tag my-clap

    uv run clap_server.py --model voiceclap-small --similarity logit   # a LAION preset

POST /v1/similarity with {"text", "audio_base64" | "audio_path", ...} answers {"similarity": s},
the cosine of the model's audio and text embeddings (or, with --similarity logit, the model's
own scale·cos + bias) — the same number benchmark.py computes in-process. Concurrent requests are batched into one forward pass
(--max-batch, --max-wait-ms). One model on N GPUs = N of these servers (--device cuda:0,
cuda:1, …) given to benchmark.py as N --endpoint options. Needs the 'clap' extra and PyTorch.
"""

import argparse
import socket
import sys
from pathlib import Path

from emolia_bench.cli import ArgumentParser
from emolia_bench.presets import PRESETS, add_loading_options, resolve_model


def arguments() -> argparse.ArgumentParser:
    """The script's options (its --help; the README's table is checked against them)."""
    p = ArgumentParser(__doc__, prog=Path(__file__).name)
    p.add_argument("--model", required=True, metavar="PRESET_OR_PATH_OR_ID",
                   help=f"a preset ({', '.join(PRESETS)}), or a transformers ClapModel checkpoint, a checkpoint with its "
                        "own modelling code, or a sentence-transformers audio-text model")
    p.add_argument("--checkpoint", metavar="PATH", help="with a preset: a local copy of its checkpoint to load instead of the hub id")
    add_loading_options(p, "--backend")  # --backend, --trust-remote-code, --similarity (as benchmark.py)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default: 8765; 0 picks a free one)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--max-seconds", type=float, help="use the first N seconds of each clip (default: the preset's, else 10)")
    p.add_argument("--max-batch", type=int, default=8, help="clips per forward pass (default: 8)")
    p.add_argument("--max-wait-ms", type=float, default=5.0, help="how long a request waits for company (default: 5)")
    p.add_argument("--max-body-mb", type=float, default=64.0, help="largest request body (default: 64)")
    p.add_argument("--receive-timeout", type=float, default=10.0,
                   help="seconds for a request's body to arrive, once its head is in, before it is refused with 408 "
                        "(default: 10); on an untrusted network put a reverse proxy in front (README)")
    p.add_argument("--dataset-root", type=Path, help="serve requests that name audio_path inside this folder")
    return p


def main(argv: list[str] | None = None) -> int:
    p = arguments()
    args = p.parse_args(argv)
    if args.dataset_root is not None and not args.dataset_root.is_dir():
        print(f"error: --dataset-root {args.dataset_root}: not a folder", file=sys.stderr)
        return 2

    from emolia_bench.clap_server import build_app, make_server
    from emolia_bench.errors import InputError
    from emolia_bench.scorers.clap import load_embedder

    preset = args.model if args.model in PRESETS else None
    if args.checkpoint and preset is None:
        p.error("--checkpoint stands in for a preset's hub id; give --model a preset, or the checkpoint as --model")
    choice = resolve_model(preset, args.checkpoint or (None if preset else args.model), args.backend, args.max_seconds,
                           args.trust_remote_code)
    if choice.note:
        print(choice.note, file=sys.stderr)
    try:
        embedder = load_embedder(choice.model, choice.backend, args.device, args.dtype, choice.max_seconds,
                                 choice.trust_remote_code, flag="--checkpoint" if args.checkpoint else "--model",
                                 attention=args.attention)
        app = build_app(embedder, args.dataset_root, args.max_batch, args.max_wait_ms, args.max_body_mb, args.similarity,
                        args.receive_timeout)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # without it every keep-alive response waits ~40 ms for a delayed ACK (headers and body are
    # written separately).
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e.strerror}", file=sys.stderr)
        return 2
    sock.listen(2048)  # listening before the URL is printed: a client may connect at once
    host, port = sock.getsockname()[:2]
    print(f"CLAP server ({choice.model} on {embedder.device}, {args.similarity}) on http://{host}:{port}/v1/similarity", flush=True)
    make_server(app).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
