"""A stand-in training loop: a few steps of arithmetic, a checkpoint file, a clean exit.

Run it with ``--steps N``; with ``--fail-at K`` it exits 3 at step K, to show failures.
"""

import argparse
import json
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--step-seconds", type=float, default=0.2)
parser.add_argument("--fail-at", type=int, default=-1)
args = parser.parse_args()

checkpoint_dir = os.environ.get("CORRAL_CHECKPOINT_DIR", ".")
checkpoint = os.path.join(checkpoint_dir, "state.json")
start = 0
if os.path.exists(checkpoint):
    with open(checkpoint) as handle:
        start = json.load(handle)["step"]
    print(f"resuming from step {start}", flush=True)


def save(step: int) -> None:
    os.makedirs(checkpoint_dir, exist_ok=True)
    with open(checkpoint, "w") as handle:
        json.dump({"step": step}, handle)


def on_term(signum, frame):
    print("SIGTERM: saving a checkpoint and leaving", flush=True)
    sys.exit(143)


signal.signal(signal.SIGTERM, on_term)
print(f"GPUs visible: {os.environ.get('CUDA_VISIBLE_DEVICES', '')!r}", flush=True)
loss = 1.0
for step in range(start, args.steps):
    if step == args.fail_at:
        print(f"step {step}: something went wrong", file=sys.stderr, flush=True)
        sys.exit(3)
    time.sleep(args.step_seconds)
    loss *= 0.7
    save(step + 1)
    print(f"step {step + 1}/{args.steps} loss {loss:.4f}", flush=True)
print("done", flush=True)
