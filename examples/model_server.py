"""A small model behind a tiny ASGI app, served on $PORT: what a Corral service replica runs.

The model is a two-layer numpy network with fixed random weights (a stand-in for a real one).

    GET  /ready                 200 once the model is loaded (the readiness path)
    POST /predict  {"x": [...]} {"y": [...], "replica": CORRAL_JOB_ID}
    GET  /stream?tokens=N       server-sent events, one "token" every STREAM_GAP_S seconds

Knobs (environment): MODEL_DIM (input width, default 16), WORK_S (seconds of extra work per
prediction, to make load visible), STARTUP_S (seconds before the model is ready), STREAM_GAP_S.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from urllib.parse import parse_qs

import numpy as np
import uvicorn

DIM = int(os.environ.get("MODEL_DIM", "16"))
WORK_S = float(os.environ.get("WORK_S", "0"))
STARTUP_S = float(os.environ.get("STARTUP_S", "0"))
STREAM_GAP_S = float(os.environ.get("STREAM_GAP_S", "0.2"))
REPLICA = os.environ.get("CORRAL_JOB_ID", "local")


class Model:
    def __init__(self, dim: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.w1 = rng.standard_normal((dim, 32)) / np.sqrt(dim)
        self.w2 = rng.standard_normal((32, 1)) / np.sqrt(32)

    def predict(self, x: np.ndarray) -> np.ndarray:
        hidden = np.maximum(x @ self.w1, 0.0)
        return 1.0 / (1.0 + np.exp(-(hidden @ self.w2)))


model = Model(DIM)
ready_at = time.monotonic() + STARTUP_S


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    path, method = scope["path"], scope["method"]
    if path == "/ready":
        ok = time.monotonic() >= ready_at
        await reply(send, 200 if ok else 503, {"ready": ok, "replica": REPLICA})
    elif path == "/predict" and method == "POST":
        await predict(receive, send)
    elif path == "/stream":
        tokens = int(parse_qs(scope["query_string"].decode()).get("tokens", ["5"])[0])
        await stream(send, tokens)
    else:
        await reply(send, 404, {"detail": f"no route {method} {path}"})


async def predict(receive, send):
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    try:
        x = np.asarray(json.loads(body or b"{}").get("x", [0.0] * DIM), dtype=float).reshape(-1, DIM)
    except (ValueError, AttributeError) as exc:
        await reply(send, 422, {"detail": f"x must be a list of {DIM} numbers (or of such lists): {exc}"})
        return
    if WORK_S:
        await asyncio.sleep(WORK_S)
    await reply(send, 200, {"y": model.predict(x).ravel().tolist(), "replica": REPLICA})


async def stream(send, tokens):
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for i in range(tokens):
        event = f"data: {json.dumps({'token': i, 'at': time.time()})}\n\n".encode()
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await asyncio.sleep(STREAM_GAP_S)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def reply(send, status, data):
    body = json.dumps(data).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


if __name__ == "__main__":
    uvicorn.run(
        app, host=os.environ.get("HOST", "0.0.0.0"), port=int(os.environ.get("PORT", "8000")), log_level="warning"
    )
