#!/usr/bin/env bash
# Run every test: formatting, lints and the template; the console's modules under Node's test
# runner; the whole workspace against the embedded store (dynoxide); interop with official
# clients; the Python and TypeScript clients as installed packages; schemathesis; fuzzing; the
# store tests again against moto's DynamoDB, a second, independent implementation; `sam build` of
# the deployed template (arm64, release); and the black-box suite through the Lambda functions
# under `sam local start-api`.
#
# Installs what it needs (Debian's chromium, Docker and debootstrap; Python tools into .venv and
# .venv-sam; cargo-fuzz; the aarch64 target) and starts and stops moto and Docker itself.
# Steps that do not need each other overlap: the installs start at once in the background, and
# the two long optimized builds (the arm64 functions, the fuzz targets) run in the background at
# the lowest CPU priority, so they take only the cores that the steps in front leave idle. Every
# step's minutes are printed in a table at the end (README: "How long the tests take").
# Usage: ./tests/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/steps.sh

passed=""
on_exit() {
  steps_stop
  # The daemon the Docker job started, if it did.
  if [ -s target/steps/dockerd.pid ]; then tests/docker.sh stop "$(cat target/steps/dockerd.pid)"; fi
  steps_table
  if [ -n "$passed" ]; then printf '\n==> all tests passed\n'; fi
}
trap on_exit EXIT
trap 'exit 143' TERM INT

# --- Installs, in the background.
venv() { # DIR REQUIREMENTS: made again only when the requirements change
  if [ ! -x "$1/bin/python" ] || ! cmp -s "$2" "$1/requirements.txt"; then
    rm -rf "$1"
    python3 -m venv "$1"
    "$1/bin/pip" install --quiet --disable-pip-version-check -r "$2"
    cp "$2" "$1/requirements.txt"
  fi
}
debian_packages() {
  # Chromium and its driver for the console's browser test; Docker and debootstrap for sam local;
  # jq for the README's first five minutes (tests/readme.rs); PostgreSQL and Redis servers for the
  # clients' fenced writes (clients/python/tests/test_fencing.py).
  if ! command -v chromium > /dev/null || ! command -v chromedriver > /dev/null \
    || ! command -v dockerd > /dev/null || ! command -v debootstrap > /dev/null \
    || ! command -v jq > /dev/null || ! command -v redis-server > /dev/null \
    || ! ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver docker.io debootstrap jq \
      redis-server postgresql > /dev/null
  fi
}
# Left to finish if the run stops early: a dpkg cut off would break the next runs. A venv cut off
# has no requirements.txt copied in, so the next run makes it again.
JOB_KEEP=1 job debian "Debian packages (chromium, docker.io, debootstrap, jq, redis-server, postgresql)" debian_packages
job venv "Python test tools (.venv)" venv .venv tests/requirements.txt
sam_tools() {
  source infra/local/venv.sh
  rustup target add aarch64-unknown-linux-gnu
}
job sam-tools "SAM tools (.venv-sam), the aarch64 target" sam_tools

step "cargo fetch" cargo fetch --locked
step "cargo fmt --check" cargo fmt --all -- --check
console_modules() {
  # The console's pure helpers (shared/console/*.js but the entry), with Node's own test runner;
  # Node comes with the machine image, as for the TypeScript client below. The shell lists the
  # files: Node 20 also takes the folder (`node --test shared/console/test/`), but Node 21 and
  # later read a folder given there as one test file and fail.
  node --test shared/console/test/*.test.mjs
}
step "the console's modules: node --test shared/console/test/" console_modules

# --- The long optimized builds, in the background at the lowest priority.
fuzz_build() {
  command -v cargo-fuzz > /dev/null || cargo install cargo-fuzz --locked
  # cargo-fuzz's instrumentation needs nightly features; RUSTC_BOOTSTRAP lets the stable toolchain
  # (the only one these machines have) use them.
  cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none -O
}
sam_build() {
  await sam-tools
  tests/sam_build.sh
}
JOB_NICE=19 job sam-build "sam build (arm64, release: the deployed functions) and its checks" sam_build
JOB_NICE=19 job fuzz-build "the fuzz targets' build (cargo-fuzz, -O)" fuzz_build

docker_up() {
  await debian
  if ! docker info > /dev/null 2>&1; then
    tests/docker.sh start target/steps/dockerd.log > target/steps/dockerd.pid
  fi
  infra/local/base-image.sh
}
job docker "Docker and the base image" docker_up

# --- In front: the debug build and everything that tests it.
cfn_lint() {
  await venv
  .venv/bin/cfn-lint infra/template.yaml
}
step "cargo clippy" cargo clippy --workspace --all-targets --quiet -- -D warnings
step "cfn-lint infra/template.yaml" cfn_lint
# One build of every target (tests, the CLI, the functions for sam local) with one feature set.
step "cargo build (debug, every target)" cargo build --workspace --all-targets
step "cargo test (embedded dynoxide)" cargo test --workspace

interop() {
  await debian
  LEASEKIT_BIN="$PWD/target/debug/leasekit" .venv/bin/python -m pytest -q tests/interop tests/infra
}
step "interop (independent verifiers, official clients) and infra facts (pytest)" interop

python_client() {
  # Installed as a user would (`pip install './clients/python[x402]'`), afresh each run so that the
  # tests see the source as it is now.
  .venv/bin/pip install --quiet --disable-pip-version-check './clients/python[x402,fencing]'
  .venv/bin/pip install --quiet --disable-pip-version-check --force-reinstall --no-deps ./clients/python
  (cd clients/python && ../../.venv/bin/mypy --strict src tests)
  # The stores the fenced writes are tested against must be here (a missing one fails, not skips).
  LEASEKIT_REQUIRE_STORES=1 LEASEKIT_BIN="$PWD/target/debug/leasekit" \
    .venv/bin/python -m pytest -q -p no:cacheprovider clients/python/tests
}
step "Python client (clients/python): pip install, mypy --strict, tests against leasekit serve" python_client

typescript_client() {
  # Node.js 20 and npm come with the machine image; Debian's own nodejs is older than the client needs.
  if ! command -v npm > /dev/null || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
    echo "the TypeScript client's tests need Node.js 20+ and npm on PATH"
    return 1
  fi
  # The stores the fenced writes are tested against must be here (a missing one fails, not skips).
  LEASEKIT_REQUIRE_STORES=1 LEASEKIT_PYTHON="$PWD/.venv/bin/python" LEASEKIT_BIN="$PWD/target/debug/leasekit" \
    clients/typescript/test.sh
}
step "TypeScript client (clients/typescript): npm ci, tsc --strict, npm pack, its tests against leasekit serve" typescript_client

schemathesis() {
  local dir serve_pid
  dir=$(mktemp -d)
  target/debug/leasekit serve --addr 127.0.0.1:0 --data-dir "$dir" --api-key "st:schemathesis-key-0123456789" \
    > "$dir/url" 2> "$dir/log" &
  serve_pid=$!
  for _ in $(seq 1 100); do [ -s "$dir/url" ] && break; sleep 0.1; done
  # /mcp is JSON-RPC (it needs an Accept header OpenAPI cannot require): the official MCP client
  # tests it in tests/interop/test_mcp.py.
  PYTHONPATH=tests SCHEMATHESIS_HOOKS=schemathesis_hooks \
  .venv/bin/schemathesis --config-file tests/schemathesis.toml run "$(head -n 1 "$dir/url")/openapi.json" \
    -H "X-API-KEY: schemathesis-key-0123456789" --max-examples "${SCHEMATHESIS_EXAMPLES:-30}" --exclude-path /mcp \
    --seed "${SCHEMATHESIS_SEED:-264649241082827299713738318542912631888}" --no-color
  kill "$serve_pid"
}
step "schemathesis against leasekit serve (bounded, fixed seed)" schemathesis

moto() {
  local port
  port=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  .venv/bin/python tests/moto_server.py "$port" > target/moto.log 2>&1 &
  local moto_pid=$!
  for _ in $(seq 1 100); do
    if .venv/bin/python -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2> /dev/null; then break; fi
    sleep 0.1
  done
  # --workspace on each command keeps the feature set of the build above, so nothing is rebuilt:
  # the store tests are leasekit-core's (its unit tests and every file in shared/tests).
  local core_tests=(--lib)
  for file in shared/tests/*.rs; do core_tests+=(--test "$(basename "$file" .rs)"); done
  export LEASEKIT_TEST_DYNAMODB_ENDPOINT="http://127.0.0.1:$port"
  cargo test --workspace "${core_tests[@]}"
  cargo test --workspace --test http_api -- serves_on_another_dynamodb_endpoint
  LEASEKIT_HISTORY_OPS="${LEASEKIT_HISTORY_OPS_MOTO:-10000}" cargo test --workspace --test history -- random_concurrent_histories
  # The Rust client's fenced writes: DynamoDB and S3 on moto (its S3 honours If-Match and
  # If-None-Match), besides the embedded store.
  LEASEKIT_TEST_S3_ENDPOINT="http://127.0.0.1:$port" cargo test --workspace --test fencing
  kill "$moto_pid"
}
step "store tests against moto (single-threaded)" moto

sam_local() {
  await docker
  await sam-tools
  LEASEKIT_FUNCTIONS='target/debug/{binary}' tests/sam_local.sh
}
step "the deployed shape: sam local start-api on the debug functions, the black-box suite through it" sam_local

fuzz_run() {
  await fuzz-build
  # Longer runs: FUZZ_SECONDS=600 ./tests/run.sh
  local target
  for target in lease_request x402_header siwx_header; do
    (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none -O "$target" "corpus/$target" \
      -- -max_total_time="${FUZZ_SECONDS:-10}" 2>&1 | grep -E "^Done|panicked|ERROR|SUMMARY" || true)
    # A crash leaves an artifact; fail the run on it.
    if compgen -G "fuzz/artifacts/$target/*" > /dev/null; then echo "fuzz: $target crashed"; return 1; fi
  done
}
step "fuzz: request parsing, the x402 header, the SIWX header (${FUZZ_SECONDS:-10} s each)" fuzz_run

step "sam build (arm64, the deployed default)" await sam-build
passed=yes
