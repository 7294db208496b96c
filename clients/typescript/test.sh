#!/usr/bin/env bash
# The TypeScript client's tests, run as a user would run the package: `npm ci` and `tsc --strict`
# here, `npm pack`, then the tarball installed into a scratch project (with the official x402
# packages and viem, from its own lockfile) whose tests import "leasekit" and run with Node's own
# test runner against `leasekit serve` (LEASEKIT_BIN, else the debug build).
# Usage: clients/typescript/test.sh
set -euo pipefail
cd "$(dirname "$0")"
here=$PWD
export LEASEKIT_BIN="${LEASEKIT_BIN:-$here/../../target/debug/leasekit}"
npm ci --no-audit --no-fund --loglevel=error
npx tsc -p tsconfig.json
rm -f leasekit-*.tgz
tarball="$here/$(npm pack --silent)"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch" "$tarball"' EXIT
cp test-project/package.json test-project/package-lock.json "$scratch/"
cp test/*.mjs ../deadlines.json "$scratch/"
mkdir "$scratch/examples" && cp ../../examples/typescript/*.mjs "$scratch/examples/"
cd "$scratch"
npm ci --no-audit --no-fund --loglevel=error
npm install --no-save --no-audit --no-fund --loglevel=error "$tarball"
node --test --test-concurrency=1 ./*.test.mjs
