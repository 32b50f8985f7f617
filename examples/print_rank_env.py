"""Print the rank environment Corral gives every process of a job."""

import os
import socket

KEYS = [
    "CORRAL_JOB_ID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "NNODES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "CORRAL_NODE",
    "CORRAL_CHECKPOINT_DIR",
    "CORRAL_RESTART_COUNT",
]

rank = os.environ.get("RANK", "?")
print(f"rank {rank} on {os.environ.get('CORRAL_NODE', socket.gethostname())}:", flush=True)
for key in KEYS:
    print(f"  {key}={os.environ.get(key, '')}", flush=True)
