#!/usr/bin/env bash
# `make demo`: a local cluster with fake GPUs running real sample jobs end to end.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "Start a local cluster: one head, two agents with 4 fake H100 GPUs each"
run corral up --agents 2 --fake-gpus 4xH100:80GB
run corral nodes

step "Submit the sample jobs"
one=$(corral submit examples/one-gpu.yaml);  echo "one-GPU job:      $one"
gang=$(corral submit examples/gang.yaml);    echo "2-node gang:      $gang"
fails=$(corral submit examples/fails.yaml);  echo "failing job:      $fails"
long=$(corral submit examples/long.yaml);    echo "job to cancel:    $long"
run corral jobs

step "Cancel the long job once it runs"
corral wait "$gang" --timeout 60 >/dev/null || true
sleep 1
run corral cancel "$long"

step "Wait for the rest"
corral wait "$one" "$gang" --timeout 120 && echo "one-GPU job and gang: SUCCEEDED"
if corral wait "$fails" --timeout 60; then echo "unexpected: $fails succeeded"; else echo "$fails failed, as it should"; fi
run corral jobs

step "Logs"
run corral logs "$one"
run corral logs "$gang" --rank 0
run corral logs "$gang" --rank 1
run corral logs "$fails"
run corral logs "$long"
run corral show "$fails"
run corral events --job "$gang"
run corral top --once

cat <<'MSG'

The local cluster keeps running. Try next:
  corral run --gpus 2 -- 'echo my GPUs: $CUDA_VISIBLE_DEVICES'
  corral run --nodes 2 --gpus 4 -- python3 examples/print_rank_env.py
  corral jobs --all            corral show JOB          corral logs JOB --follow
  corral status                corral config   (the head URL and token, for curl and scripts)
  corral top                   corral events --follow      curl $(corral config -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["head_url"])')/metrics
  The REST API is documented at the head URL + /docs.
Stop it with:
MSG
echo "  corral down        (state stays under ${CORRAL_HOME:-~/.corral}; \`corral up\` resumes it)"
