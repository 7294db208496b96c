#!/usr/bin/env bash
# Run every test: formatting and lints, the whole workspace against the embedded store (dynoxide),
# then the store tests again against moto's DynamoDB, a second, independent implementation.
# Installs what it needs (Python packages into .venv) and starts and stops moto itself.
# Usage: ./tests/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "Python test tools (.venv)"
if [ ! -x .venv/bin/python ] || ! cmp -s tests/requirements.txt .venv/requirements.txt; then
  rm -rf .venv
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
  cp tests/requirements.txt .venv/requirements.txt
fi

step "chromium and chromedriver (Debian's, for the console's browser test)"
if ! command -v chromium > /dev/null || ! command -v chromedriver > /dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver > /dev/null
fi

step "cfn-lint infra/template.yaml"
.venv/bin/cfn-lint infra/template.yaml

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo test (embedded dynoxide)"
cargo test --workspace

step "interop (independent verifiers, official clients) and infra facts (pytest)"
LEASEKIT_BIN="$PWD/target/debug/leasekit" .venv/bin/python -m pytest -q tests/interop tests/infra

step "Python client (clients/python): pip install, mypy --strict, tests against leasekit serve"
# Installed as a user would (`pip install './clients/python[x402]'`), afresh each run so that the tests
# see the source as it is now.
.venv/bin/pip install --quiet --disable-pip-version-check './clients/python[x402]'
.venv/bin/pip install --quiet --disable-pip-version-check --force-reinstall --no-deps ./clients/python
(cd clients/python && ../../.venv/bin/mypy --strict src tests)
LEASEKIT_BIN="$PWD/target/debug/leasekit" .venv/bin/python -m pytest -q -p no:cacheprovider clients/python/tests

step "TypeScript client (clients/typescript): npm ci, tsc --strict, npm pack, its tests against leasekit serve"
# Node.js 20 and npm come with the machine image; Debian's own nodejs is older than the client needs.
if ! command -v npm > /dev/null || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "the TypeScript client's tests need Node.js 20+ and npm on PATH"; exit 1
fi
LEASEKIT_BIN="$PWD/target/debug/leasekit" clients/typescript/test.sh

step "schemathesis against leasekit serve (bounded, fixed seed)"
st_dir=$(mktemp -d)
target/debug/leasekit serve --addr 127.0.0.1:0 --data-dir "$st_dir" --api-key "st:schemathesis-key-0123456789" \
  > "$st_dir/url" 2> "$st_dir/log" &
serve_pid=$!
for _ in $(seq 1 100); do [ -s "$st_dir/url" ] && break; sleep 0.1; done
# /mcp is JSON-RPC (it needs an Accept header OpenAPI cannot require): the official MCP client
# tests it in tests/interop/test_mcp.py.
PYTHONPATH=tests SCHEMATHESIS_HOOKS=schemathesis_hooks \
.venv/bin/schemathesis --config-file tests/schemathesis.toml run "$(head -n 1 "$st_dir/url")/openapi.json" \
  -H "X-API-KEY: schemathesis-key-0123456789" --max-examples "${SCHEMATHESIS_EXAMPLES:-30}" --exclude-path /mcp \
  --seed "${SCHEMATHESIS_SEED:-264649241082827299713738318542912631888}" --no-color
kill "$serve_pid"

step "fuzz: request parsing, the x402 header, the SIWX header (${FUZZ_SECONDS:-10} s each)"
# cargo-fuzz's instrumentation needs nightly features; RUSTC_BOOTSTRAP lets the stable toolchain
# (the only one these machines have) use them. Longer runs: FUZZ_SECONDS=600 ./tests/run.sh
command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz --locked --quiet
for target in lease_request x402_header siwx_header; do
  (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none -O "$target" "corpus/$target" \
    -- -max_total_time="${FUZZ_SECONDS:-10}" 2>&1 | grep -E "^Done|panicked|ERROR|SUMMARY" || true)
  # A crash leaves an artifact; fail the run on it.
  if compgen -G "fuzz/artifacts/$target/*" > /dev/null; then echo "fuzz: $target crashed"; exit 1; fi
done

step "store tests against moto (single-threaded)"
port=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
.venv/bin/python tests/moto_server.py "$port" > target/moto.log 2>&1 &
moto_pid=$!
trap 'kill "$moto_pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  if .venv/bin/python -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then break; fi
  sleep 0.1
done
export LEASEKIT_TEST_DYNAMODB_ENDPOINT="http://127.0.0.1:$port"
cargo test -p leasekit-core --tests
cargo test --test http_api -- serves_on_another_dynamodb_endpoint
LEASEKIT_HISTORY_OPS="${LEASEKIT_HISTORY_OPS_MOTO:-10000}" cargo test --test history -- random_concurrent_histories

step "the deployed shape: sam build (arm64, x86_64), sam local start-api, the black-box suite through it"
tests/sam_local.sh

step "all tests passed"
