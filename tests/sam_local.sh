#!/usr/bin/env bash
# The deployed shape, built and run: `sam build` for arm64 (the default) and x86_64, then
# `sam local start-api` (infra/local/start.sh: every function container on the host network, all
# traffic on 127.0.0.1) with the black-box suite (tests/interop, official clients) through it.
# Installs what it needs (docker.io, debootstrap, the SAM venv, the aarch64 Rust target), starts
# the Docker daemon if none runs (no bridge network) and stops everything it started.
# Figures (build times, functions' init durations, warm latency per route) go to
# target/sam-local/figures.txt. Usage: tests/sam_local.sh   (from tests/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/sam-local
rm -rf "$out" && mkdir -p "$out"
started_dockerd=""
sam_pid=""
cleanup() {
  # start.sh stops SAM, removes the containers SAM made (by id) and stops local-aws.
  if [ -n "$sam_pid" ]; then kill "$sam_pid" 2> /dev/null || true; wait "$sam_pid" 2> /dev/null || true; fi
  if [ -n "$started_dockerd" ]; then kill "$started_dockerd" 2> /dev/null || true; wait "$started_dockerd" 2> /dev/null || true; fi
}
trap cleanup EXIT

if ! command -v dockerd > /dev/null || ! command -v debootstrap > /dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap > /dev/null
fi
if ! docker info > /dev/null 2>&1; then
  # No bridge, no iptables: containers can only use the host network, and only 127.0.0.1 is used.
  dockerd --bridge=none --iptables=false --ip-masq=false > "$out/dockerd.log" 2>&1 &
  started_dockerd=$!
  for _ in $(seq 1 100); do docker info > /dev/null 2>&1 && break; sleep 0.2; done
fi
rustup target list --installed | grep -q aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu

# SAM CLI, cargo-lambda and zig in .venv-sam.
source infra/local/venv.sh

# arm64, exactly as the README says (`sam build` reads samconfig.toml).
start=$(date +%s)
sam build > "$out/build-arm64.log" 2>&1 || { tail -n 50 "$out/build-arm64.log"; exit 1; }
echo "sam build (arm64, the default): $(( $(date +%s) - start )) s" | tee -a "$out/figures.txt"
python3 -c "import sys; b = open(sys.argv[1], 'rb').read(20); sys.exit(0 if b[:4] == b'\\x7fELF' and int.from_bytes(b[18:20], 'little') == 183 else 1)" .aws-sam/build/LeaseFunction/bootstrap || { echo "sam build did not make an arm64 binary"; exit 1; }

# x86_64, and serve it (start.sh builds it: the time includes only what arm64 did not build).
start=$(date +%s)
LEASEKIT_BIN="$PWD/target/debug/leasekit" PORT=3000 LEASEKIT_LAMBDA_DATA="$out/data" \
  SAM_LOG="$out/sam.log" infra/local/start.sh > "$out/start.log" 2>&1 &
sam_pid=$!
for _ in $(seq 1 1800); do
  curl -sf -o /dev/null http://127.0.0.1:3000/openapi.json && break
  kill -0 "$sam_pid" 2> /dev/null || { tail -n 80 "$out/start.log" "$out/sam.log" 2> /dev/null; exit 1; }
  sleep 1
done
echo "sam build (x86_64) and sam local start-api up: $(( $(date +%s) - start )) s" | tee -a "$out/figures.txt"

aws_url=$(head -n 1 "$out/data/local-aws.url")
key=$(RUST_LOG=error target/debug/leasekit keys create --account ci --dynamodb-endpoint "$aws_url" \
  --table-prefix leasekit-)
LEASEKIT_URL=http://127.0.0.1:3000 LEASEKIT_API_KEY="$key" LEASEKIT_TARGET=sam-local LEASEKIT_SAM_LOG="$out/sam.log" \
  LEASEKIT_BIN="$PWD/target/debug/leasekit" .venv/bin/python -m pytest -q tests/interop
.venv/bin/python tests/sam_figures.py http://127.0.0.1:3000 "$key" "$out/sam.log" | tee -a "$out/figures.txt"
