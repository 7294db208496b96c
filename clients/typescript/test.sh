#!/usr/bin/env bash
# The TypeScript client's tests, run as a user would run the package: `npm ci` here (which builds
# with `tsc --strict`), `npm pack` (which builds again, from nothing), then the tarball installed into a scratch project (with the official x402
# packages and viem, the AWS SDK's DynamoDB and S3 clients and pg, from its own lockfile) whose
# tests import "leasekit" and run with Node's own test runner against `leasekit serve`
# (LEASEKIT_BIN, else the debug build) and, for the fenced writes, real stores (LEASEKIT_PYTHON,
# LEASEKIT_MOTO_SERVER, LEASEKIT_REQUIRE_STORES: see below).
# Usage: clients/typescript/test.sh
set -euo pipefail
cd "$(dirname "$0")"
here=$PWD
export LEASEKIT_BIN="${LEASEKIT_BIN:-$here/../../target/debug/leasekit}"
# The fenced writes' stores (test/fencing.test.mjs): moto's server, run by a Python that has moto
# (the repository's .venv unless told), and Debian's PostgreSQL. Absolute paths: the tests run
# from a scratch copy.
root=$(cd "$here/../.." && pwd)
export LEASEKIT_MOTO_SERVER="${LEASEKIT_MOTO_SERVER:-$root/tests/moto_server.py}"
if [ -z "${LEASEKIT_PYTHON:-}" ] && [ -x "$root/.venv/bin/python" ]; then export LEASEKIT_PYTHON="$root/.venv/bin/python"; fi
# No dist/ to start from: `npm ci` builds it (its `prepare`, tsc --strict), and so does `npm pack`
# alone, so a package packed from a fresh checkout has its code (it once had none).
rm -rf dist leasekit-*.tgz
npm ci --no-audit --no-fund --loglevel=error
test -f dist/index.js || { echo "npm ci did not build dist/"; exit 1; }
rm -rf dist
tarball="$here/$(npm pack --silent | tail -n 1)"
# (The listing whole first: `grep -q` stops reading at its match, and tar's broken pipe would
# fail the pipeline.)
listing=$(tar -tzf "$tarball")
grep -qx 'package/dist/index.js' <<< "$listing" || { echo "npm pack shipped no dist/index.js"; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch" "$tarball"' EXIT
cp test-project/package.json test-project/package-lock.json "$scratch/"
cp test/*.mjs ../deadlines.json "$scratch/"
mkdir "$scratch/examples" && cp ../../examples/typescript/*.mjs "$scratch/examples/"
cd "$scratch"
npm ci --no-audit --no-fund --loglevel=error
npm install --no-save --no-audit --no-fund --loglevel=error "$tarball"
node --test --test-concurrency=1 ./*.test.mjs
