#!/usr/bin/env bash
# The deployed shape, locally: the Lambda functions behind SAM's emulation of API Gateway and the
# authorizer, every container on the host network, with `leasekit local-aws` as their DynamoDB,
# Secrets Manager (the signing key) and x402 facilitator (local settlements, no money), all on
# 127.0.0.1. Data (store and key) in $LEASEKIT_LAMBDA_DATA.
#
# The functions are this machine's (x86_64) debug builds, laid out in .aws-sam/build-x86_64 by
# infra/local/stage.py exactly as `sam build` lays out its release builds (the same template, one
# `bootstrap` per function; tests/sam_build.sh checks that): a debug build takes a minute where
# the release profile (fat LTO, opt-level 3) takes a quarter of an hour. They are linked against
# this machine's glibc, and the base image is Debian 12's (2.36): on a machine with a newer glibc,
# stage binaries that `cargo lambda build` made instead (zig links them for an older one):
# LEASEKIT_FUNCTIONS='target/lambda/{binary}/bootstrap'.
#
# Needs Docker (a running daemon), Python 3.11+ and a Rust toolchain. Installs SAM CLI, cargo-lambda
# and zig into .venv-sam, builds the base image offline (infra/local/base-image.sh).
#
# Usage: infra/local/start.sh            then http://127.0.0.1:3000 (Ctrl-C stops everything)
# Environment: PORT (3000); LEASEKIT_FUNCTIONS, the functions' binaries with {binary} for each
#   one's name (default: target/debug/{binary}, built here with `cargo build --workspace --bins`);
#   LEASEKIT_BIN (default: target/debug/leasekit, built with them); LEASEKIT_LAMBDA_DATA
#   (.leasekit-lambda); SAM_LOG (a file for SAM's output; default the terminal).
set -euo pipefail
cd "$(dirname "$0")/../.."
port=${PORT:-3000}
data=${LEASEKIT_LAMBDA_DATA:-.leasekit-lambda}

# SAM CLI, cargo-lambda and zig in .venv-sam.
source infra/local/venv.sh
docker info > /dev/null 2>&1 || { echo "start.sh: Docker is not running (start the daemon first)" >&2; exit 1; }
infra/local/base-image.sh

functions=${LEASEKIT_FUNCTIONS:-}
if [ -z "$functions" ]; then
  cargo build --quiet --workspace --bins
  functions='target/debug/{binary}'
elif [ -z "${LEASEKIT_BIN:-}" ]; then
  cargo build --quiet --bin leasekit
fi
LEASEKIT_BIN=${LEASEKIT_BIN:-target/debug/leasekit}
rm -rf .aws-sam/build-x86_64
python infra/local/stage.py infra/template.yaml "$functions" .aws-sam/build-x86_64

mkdir -p "$data"
"$LEASEKIT_BIN" local-aws --addr 127.0.0.1:0 --data-dir "$data" > "$data/local-aws.url" &
aws_pid=$!
sam_pid=""
export LEASEKIT_SAM_CONTAINERS="$data/containers"
: > "$LEASEKIT_SAM_CONTAINERS"
stop() {
  # SIGTERM, not SIGINT: a background job of a script ignores SIGINT. SAM then leaves its
  # containers, which are removed here, by id.
  if [ -n "$sam_pid" ]; then kill "$sam_pid" 2> /dev/null || true; wait "$sam_pid" 2> /dev/null || true; fi
  while read -r id; do docker rm -f "$id" > /dev/null 2>&1 || true; done < "$LEASEKIT_SAM_CONTAINERS"
  kill "$aws_pid" 2> /dev/null || true
  wait "$aws_pid" 2> /dev/null || true
}
# Stop what this script started, however it ends (Ctrl-C, SIGTERM, an error).
trap stop EXIT
trap 'exit 143' TERM INT
for _ in $(seq 1 100); do [ -s "$data/local-aws.url" ] && break; sleep 0.1; done
aws_url=$(head -n 1 "$data/local-aws.url")
[ -n "$aws_url" ] || { echo "start.sh: leasekit local-aws did not start ($LEASEKIT_BIN)" >&2; exit 1; }

# SAM resolves a table's !Ref to its logical id locally: name the tables local-aws created.
cat > "$data/env.json" <<JSON
{"Parameters": {
  "AWS_ENDPOINT_URL": "$aws_url",
  "LEASES_TABLE": "leasekit-leases", "REQUESTS_TABLE": "leasekit-requests",
  "KEYS_TABLE": "leasekit-keys", "PAYMENTS_TABLE": "leasekit-payments",
  "CLAIMS_TABLE": "leasekit-claims",
  "LEASEKIT_PUBLIC_URL": "http://127.0.0.1:$port",
  "X402_FACILITATOR_URL": "$aws_url"
}}
JSON
echo "leasekit local-aws on $aws_url; the API on http://127.0.0.1:$port once SAM says so" >&2
python infra/local/sam_local.py start-api \
  --template .aws-sam/build-x86_64/template.yaml --host 127.0.0.1 --port "$port" \
  --skip-pull-image --warm-containers EAGER --docker-network host --env-vars "$data/env.json" \
  --parameter-overrides "Architecture=x86_64 LocalAwsEndpoint=$aws_url PublicUrl=http://127.0.0.1:$port \
PayTo=0x000000000000000000000000000000000000dEaD PaymentNetwork=eip155:84532 \
PaymentAsset=0x036CbD53842c5426634e7929541eC2318f3dCF7e PaymentTokenName=USDC FacilitatorUrl=$aws_url" \
  > "${SAM_LOG:-/dev/stderr}" 2>&1 &
sam_pid=$!
wait "$sam_pid"
