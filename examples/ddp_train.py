"""Data-parallel training with PyTorch DDP that survives restarts (see docs/distributed.md).

Run it with ``launcher: per-gpu`` (one process per GPU; every rank variable comes from Corral):

* gloo on CPU, nccl where CUDA is available;
* rank 0 saves a checkpoint every ``--checkpoint-every`` steps into ``CORRAL_CHECKPOINT_DIR``
  (temporary file, then rename) and touches ``.corral-checkpoint`` there after each save;
* on start every rank resumes from the last checkpoint, if there is one;
* on SIGTERM (cancel, preemption, time limit) the ranks agree to stop at the next step, rank 0
  saves a checkpoint and they leave with 143;
* at the end each rank writes a digest of its final parameters (``digest-rank-R``), so ranks can
  be compared.

Every collective is bounded by ``--timeout``; on any error a rank leaves at once with ``os._exit``.
"""

import signal
import sys

stop_requested = False


def _on_sigterm(signum, frame):
    global stop_requested
    stop_requested = True


# Installed before the slow imports, so a stop during start-up is not lost.
signal.signal(signal.SIGTERM, _on_sigterm)

import argparse  # noqa: E402
import hashlib  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

CHECKPOINT = "model.pt"
MARKER = ".corral-checkpoint"


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="extra time per step, to slow it down")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds any rendezvous or collective may take")
    parser.add_argument("--fail-rank", type=int, default=-1, help="this rank exits with --fail-code ...")
    parser.add_argument("--fail-step", type=int, default=-1, help="... when it reaches this step")
    parser.add_argument("--fail-code", type=int, default=3)
    parser.add_argument("--peer-wait", type=float, default=1.0, help="see leave_after_error")
    return parser.parse_args()


def log(message):
    print(f"[rank {os.environ.get('RANK', '0')}] {message}", flush=True)


def checkpoint_dir():
    path = Path(os.environ.get("CORRAL_CHECKPOINT_DIR", "checkpoints"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_checkpoint(model, optimizer, step):
    """Atomically: a reader sees the previous checkpoint or this one, never half of one."""
    directory = checkpoint_dir()
    tmp = directory / f"{CHECKPOINT}.tmp-{os.getpid()}"
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
    os.replace(tmp, directory / CHECKPOINT)
    (directory / MARKER).touch()  # its mtime tells the scheduler when the job last saved
    log(f"checkpoint saved at step {step}")


def load_checkpoint(model, optimizer):
    """The step to start from: that of the last checkpoint, or 0."""
    path = checkpoint_dir() / CHECKPOINT
    if not path.exists():
        return 0
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return int(state["step"])


def batch(step, rank, device):
    """The same data for a (step, rank) pair in every attempt."""
    generator = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(32, 8, generator=generator)
    y = x.sum(dim=1, keepdim=True) * 0.5
    return x.to(device), y.to(device)


def digest(model):
    sha = hashlib.sha256()
    for name, param in sorted(model.state_dict().items()):
        sha.update(name.encode())
        sha.update(param.detach().cpu().numpy().tobytes())
    return sha.hexdigest()


def stop_agreed(device):
    """Whether any rank was asked to stop: all stop at the same step."""
    flag = torch.tensor([1.0 if stop_requested else 0.0], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return flag.item() > 0


def train(args):
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    log(f"CORRAL_RESTART_COUNT={os.environ.get('CORRAL_RESTART_COUNT', '0')}")
    use_cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{local_rank}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if use_cuda else "gloo", init_method="env://", timeout=timedelta(seconds=args.timeout)
    )
    torch.manual_seed(0)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    start = load_checkpoint(model, optimizer)
    log(f"resumed from step {start}" if start else "starting from step 0")
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if use_cuda else None)
    for step in range(start, args.steps):
        if stop_agreed(device):
            if rank == 0:
                save_checkpoint(model, optimizer, step)
            log(f"SIGTERM: stopping at step {step}")
            sys.stdout.flush()
            os._exit(143)
        if rank == args.fail_rank and step == args.fail_step:
            log(f"failing on purpose at step {step} with exit code {args.fail_code}")
            os._exit(args.fail_code)
        x, y = batch(step, rank, device)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # DDP averages the gradients across ranks here
        optimizer.step()
        done = step + 1
        if step == start:
            log(f"first step of this attempt done at {time.time():.3f}")  # bench/recovery.py reads it
        if done % 10 == 0:
            log(f"step {done}/{args.steps} loss {loss.item():.4f}")
        if rank == 0 and done % args.checkpoint_every == 0 and done < args.steps:
            save_checkpoint(model, optimizer, done)
        time.sleep(args.step_seconds)
    final = digest(model)
    (checkpoint_dir() / f"digest-rank-{rank}").write_text(final + "\n")
    log(f"done: {args.steps} steps, parameters {final[:16]}")
    dist.barrier()
    dist.destroy_process_group()


def leave_after_error(peer_wait_s):
    """Leave with 1, but give the agent ``peer_wait_s`` to stop this rank first.

    When another rank dies, the collectives of the living ones fail at once. Waiting a moment for
    the SIGTERM of the gang's teardown lets the rank that failed first be the one reported, with
    its own exit code, rather than every rank's secondary failure racing it.
    """
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    if stop_requested:
        os._exit(143)
    time.sleep(peer_wait_s)
    os._exit(1)


def main():
    args = parse_args()
    try:
        train(args)
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        leave_after_error(args.peer_wait)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: it can hang on a dead peer's sockets


if __name__ == "__main__":
    main()
