"""A local stand-in for a CLAP similarity endpoint, for testing the benchmark's remote path.

    uv run sham_clap_server.py --port 8765
    uv run benchmark.py --endpoint http://127.0.0.1:8765/v1/similarity

POST /v1/similarity with {"text", "audio_filename", "audio_base64", "audio_path", "item_stem"}
answers {"similarity": s} where s is exactly the local sham score of item_stem (or the stem of
audio_filename) and text, so scores through the server equal benchmark.py's sham mode.
GET /health answers 200. Errors are JSON: 400 malformed request or a path outside
--dataset-root, 404 unknown URL or clip, 411/413 missing or oversized body. Serves requests
concurrently; --latency-ms simulates model time for throughput benchmarks. Stop with Ctrl-C.
"""

import argparse
import sys
from pathlib import Path

from emolia_bench.cli import ArgumentParser, run


def arguments() -> argparse.ArgumentParser:
    """The script's options (its --help; the README's table is checked against them)."""
    p = ArgumentParser(__doc__, prog=Path(__file__).name)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default: 8765; 0 picks a free one)")
    p.add_argument("--max-body-mb", type=float, default=64.0, help="largest request body accepted (default: 64 MB)")
    p.add_argument("--latency-ms", type=float, default=0.0, help="sleep this long per request, like a model (default: 0)")
    p.add_argument("--dataset-root", type=Path,
                   help="check that each request's audio_path names a clip inside this folder (paths escaping it: 400)")
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    p = arguments()
    args = p.parse_args(argv)
    from emolia_bench.sham_server import make_server, url_of

    if args.dataset_root is not None and not args.dataset_root.is_dir():
        print(f"error: --dataset-root {args.dataset_root}: not a folder", file=sys.stderr)
        return 2
    try:
        server = make_server(args.host, args.port, max_body_mb=args.max_body_mb, latency_ms=args.latency_ms,
                             dataset_root=args.dataset_root, verbose=args.verbose)
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e.strerror}", file=sys.stderr)
        return 2
    print(f"sham CLAP server on {url_of(server)}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    run(main)
