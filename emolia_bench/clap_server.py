"""Serve an in-process CLAP model behind the endpoint contract (README) (FastAPI + uvicorn).

Requests are decoded concurrently, then a single batching thread gathers the waveforms of
concurrent requests (up to ``max_batch``, waiting at most ``max_wait_ms`` for company) into
one forward pass, so an accelerator stays busy; prompt embeddings are computed once per
distinct prompt and kept. Scores equal the in-process backend's (the same decoding, cropping
and batch-independent embedding).

HTTP itself is uvicorn's, configured through its own settings (:func:`make_server`): idle
keep-alive connections close after ``keep_alive`` seconds, a request head may not outgrow
:data:`MAX_HEADER_BYTES`, and at most ``limit_concurrency`` connections are served at once (more
get 503). Once the head is in, the body must arrive within ``receive_timeout`` seconds (a JSON
408). uvicorn does not bound how long a head may take to arrive, so on an untrusted network
put a reverse proxy in front (README: "Serving a real model").

(No ``from __future__ import annotations`` here: FastAPI must see the real ``Request`` type.)
"""


import asyncio
import base64
import binascii
import json
import queue
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from .paths import ClipRefused, clip_problem, read_clip


class Batcher:
    def __init__(self, embedder, max_batch: int = 8, max_wait_ms: float = 5.0, transform=None):
        self.embedder, self.max_batch, self.max_wait = embedder, max(1, max_batch), max_wait_ms / 1000
        self.transform = transform or (lambda cos: cos)  # cosine -> the similarity served (cosine or logit)
        self.jobs: queue.Queue = queue.Queue()
        self.texts: dict[str, np.ndarray] = {}
        self.batches = 0
        threading.Thread(target=self._run, daemon=True, name="clap-batcher").start()

    def submit(self, wave: np.ndarray, text: str) -> Future:
        fut: Future = Future()
        self.jobs.put((wave, text, fut))
        return fut

    def _run(self) -> None:
        while True:
            batch = [self.jobs.get()]
            try:
                while len(batch) < self.max_batch:
                    batch.append(self.jobs.get(timeout=self.max_wait))
            except queue.Empty:
                pass
            try:
                new = sorted({t for _, t, _ in batch} - self.texts.keys())
                if new:
                    self.texts.update(zip(new, self.embedder.embed_texts(new), strict=True))
                audio = self.embedder.embed_audio([w for w, _, _ in batch])
                self.batches += 1
                for (_, text, fut), a in zip(batch, audio, strict=True):
                    fut.set_result(self.transform(float(np.dot(a.astype(np.float64), self.texts[text].astype(np.float64)))))
            except Exception as e:  # noqa: BLE001 - hand the failure to every waiting request
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)


def build_app(embedder, dataset_root: Path | None = None, max_batch: int = 8, max_wait_ms: float = 5.0,
              max_body_mb: float = 64.0, similarity: str = "cosine", receive_timeout: float = 10.0):
    """The FastAPI app; ``similarity`` ``logit`` serves scale·cos + bias (bad input when the
    model has no learned scale and bias, raised here, before anything is served)."""
    from fastapi import FastAPI, Request
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import JSONResponse

    from .scorers.clap import decode_audio, similarity_transform

    served = similarity  # (the route below is also called similarity)
    transform = similarity_transform(embedder, served)
    app = FastAPI(title="emolia-bench CLAP server")

    @app.middleware("http")
    async def bounded_headers(request: Request, call_next):
        # a head that arrives whole in one read passes h11's incomplete-event limit; same bound here
        if sum(len(k) + len(v) for k, v in request.scope["headers"]) > MAX_HEADER_BYTES:
            response = error(431, "request headers too large")
            response.headers["connection"] = "close"  # what follows on this connection is suspect
            return response
        return await call_next(request)

    batcher = Batcher(embedder, max_batch, max_wait_ms, transform)
    app.state.batcher = batcher
    root = Path(dataset_root).resolve() if dataset_root else None
    limit = int(max_body_mb * 1024 * 1024)

    def error(status: int, message: str) -> JSONResponse:
        print(f"refused {status}: {message}", file=sys.stderr)  # one line per refused request
        return JSONResponse({"error": message}, status_code=status)

    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect

    @app.exception_handler(HTTPException)
    async def http_error(request, exc):  # unknown paths, methods not allowed: JSON like every error here
        response = error(exc.status_code, str(exc.detail))
        response.headers.update(getattr(exc, "headers", None) or {})
        return response

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": embedder.name, "similarity": served, "batches": batcher.batches}

    @app.post("/v1/similarity")
    async def similarity(request: Request):
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            return error(413, f"body exceeds the limit of {limit} bytes")
        async def bounded_body() -> bytes | None:
            # read as it arrives and stop past the limit: a chunked body announces no length
            parts, size = [], 0
            async for part in request.stream():
                size += len(part)
                if size > limit:
                    return None
                parts.append(part)
            return b"".join(parts)

        try:
            body = await asyncio.wait_for(bounded_body(), receive_timeout)
        except TimeoutError:  # a client dripping its body holds no batch slot past this
            response = error(408, f"request body not received within {receive_timeout:g} s")
            response.headers["connection"] = "close"
            return response
        except ClientDisconnect:
            return JSONResponse({"error": "client disconnected"}, status_code=400)
        if body is None:
            response = error(413, f"body exceeds the limit of {limit} bytes")
            response.headers["connection"] = "close"  # the rest of the body is not read
            return response
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return error(400, "body is not valid JSON")
        except RecursionError:
            return error(400, "body is nested too deeply")
        if not isinstance(payload, dict):
            return error(400, "body must be a JSON object")
        text = payload.get("text")
        if not isinstance(text, str) or not text:
            return error(400, "'text' must be a non-empty string")
        for field in ("audio_base64", "audio_path", "audio_filename", "item_stem"):
            if payload.get(field) is not None and not isinstance(payload[field], str):
                return error(400, f"'{field}' must be a string")
        if payload.get("audio_base64"):
            try:
                data = base64.b64decode(payload["audio_base64"], validate=True)
            except (binascii.Error, ValueError):
                return error(400, "'audio_base64' is not valid base64")
        elif root is not None and payload.get("audio_path"):
            problem = clip_problem(root, payload["audio_path"])  # inside the root, a regular file
            if problem is not None:
                missing = problem.startswith("audio_unreadable") and "No such file" in problem
                return error(404 if missing else 400, "no clip at audio_path under the dataset root" if missing else problem)
            try:
                data = await run_in_threadpool(read_clip, root, payload["audio_path"])
            except ClipRefused as e:
                return error(400, str(e))
        else:
            return error(400, "need 'audio_base64' (or 'audio_path' when the server has a dataset root)")
        try:
            wave = await run_in_threadpool(decode_audio, data, embedder.rate, embedder.max_seconds)
        except Exception as e:  # noqa: BLE001 - any decoder failure is the client's clip
            return error(400, f"audio could not be decoded ({type(e).__name__})")
        try:
            value = await asyncio.wrap_future(batcher.submit(wave, text))
        except Exception as e:  # noqa: BLE001
            return error(500, f"model failure ({type(e).__name__})")
        return {"similarity": value}

    return app


MAX_HEADER_BYTES = 16 * 1024  # h11's default limit on an incomplete request head, applied to complete ones too


def make_server(app, keep_alive: float = 5.0, limit_concurrency: int = 1024):
    """A ``uvicorn.Server`` for ``app`` with uvicorn's own bounds (module docstring);
    ``.run(sockets=[sock])`` serves until interrupted (or until ``.should_exit`` is set)."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", timeout_keep_alive=keep_alive,
                            h11_max_incomplete_event_size=MAX_HEADER_BYTES, limit_concurrency=limit_concurrency)
    return uvicorn.Server(config)
