#!/usr/bin/env bash
# The deployed shape, run: `sam local start-api` (infra/local/start.sh: the functions laid out as
# `sam build` lays them out, every function container on the host network, all traffic on
# 127.0.0.1) with the black-box suite (tests/interop, official clients) through it. The functions
# are the debug builds of this machine (x86_64) that the Rust suites use: tests/sam_build.sh
# builds and checks the release arm64 ones that deploy.
# Installs what it needs (docker.io, debootstrap, the SAM venv), starts the Docker daemon if none
# runs (no bridge network) and stops everything it started.
# Figures (the functions' init durations, warm latency per route) go to
# target/sam-local/figures.txt. Usage: tests/sam_local.sh   (from tests/run.sh, after the debug
# build: LEASEKIT_FUNCTIONS=target/debug/{binary})
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/sam-local
rm -rf "$out" && mkdir -p "$out"
started_dockerd=""
sam_pid=""
cleanup() {
  # start.sh stops SAM, removes the containers SAM made (by id) and stops local-aws.
  if [ -n "$sam_pid" ]; then kill "$sam_pid" 2> /dev/null || true; wait "$sam_pid" 2> /dev/null || true; fi
  if [ -n "$started_dockerd" ]; then tests/docker.sh stop "$started_dockerd"; fi
}
trap cleanup EXIT

tests/docker.sh install
if ! docker info > /dev/null 2>&1; then
  tests/docker.sh start "$out/dockerd.log" > "$out/dockerd.pid"
  started_dockerd=$(cat "$out/dockerd.pid")
fi

start=$(date +%s)
functions=${LEASEKIT_FUNCTIONS:-}
[ -n "$functions" ] || functions='target/debug/{binary}'
LEASEKIT_FUNCTIONS="$functions" LEASEKIT_BIN="$PWD/target/debug/leasekit" PORT=3000 \
  LEASEKIT_LAMBDA_DATA="$out/data" SAM_LOG="$out/sam.log" infra/local/start.sh > "$out/start.log" 2>&1 &
sam_pid=$!
for _ in $(seq 1 600); do
  curl -sf -o /dev/null http://127.0.0.1:3000/openapi.json && break
  kill -0 "$sam_pid" 2> /dev/null || { tail -n 80 "$out/start.log" "$out/sam.log" 2> /dev/null; exit 1; }
  sleep 1
done
echo "sam local start-api up: $(( $(date +%s) - start )) s (functions: $functions)" | tee -a "$out/figures.txt"

aws_url=$(head -n 1 "$out/data/local-aws.url")
key=$(RUST_LOG=error target/debug/leasekit keys create --account ci --dynamodb-endpoint "$aws_url" \
  --table-prefix leasekit-)
LEASEKIT_URL=http://127.0.0.1:3000 LEASEKIT_API_KEY="$key" LEASEKIT_TARGET=sam-local LEASEKIT_SAM_LOG="$out/sam.log" \
  LEASEKIT_BIN="$PWD/target/debug/leasekit" .venv/bin/python -m pytest -q tests/interop
.venv/bin/python tests/sam_figures.py http://127.0.0.1:3000 "$key" "$out/sam.log" | tee -a "$out/figures.txt"
