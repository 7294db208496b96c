#!/bin/bash
# Where the local server's CPU goes: a flame graph of `leasekit serve` under bench/loadgen.
#
#   bench/profile.sh [CLIENTS] [SECONDS] [OUT.svg]     (defaults: 16 clients, 8 s)
#
# Needs perf (linux-perf) and inferno (`cargo install inferno`). Builds the `profiling` profile
# (the release build with symbols) and the load generator, starts a server on a fresh data dir,
# samples it at 499 Hz with DWARF call graphs while the clients run, and writes the SVG (frames
# narrower than 2 px left out, generic arguments stripped so names stay readable). It also prints
# the load generator's figures (perf slows the server, so take throughput from bench/versus.py)
# and where the samples went (bench/profile_shares.py). NO_BUILD=1 skips the two builds.
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-16}
seconds=${2:-8}
out=${3:-target/profile-$clients.svg}
[ -n "${NO_BUILD:-}" ] || cargo build --profile profiling --bin leasekit
[ -n "${NO_BUILD:-}" ] || cargo build --release -p loadgen
work=$(mktemp -d -p target profile-XXXX)
target/profiling/leasekit serve --addr 127.0.0.1:0 --data-dir "$work/data" \
  --api-key bench:bench-key-0123456789abcdef >"$work/url" 2>"$work/server.log" &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/url" ] && break; sleep 0.05; done
perf record -q -o "$work/perf.data" -F 499 --call-graph dwarf,32768 -p "$server" \
  -- sleep $((seconds + 1)) &
recorder=$!
target/release/loadgen --system leasekit --url "$(head -1 "$work/url")" --clients "$clients" \
  --seconds "$seconds" --label profile
wait $recorder
perf script -i "$work/perf.data" 2>/dev/null | inferno-collapse-perf >"$work/folded"
# Generic arguments stripped so names stay readable; kept beside the SVG for
# bench/profile_shares.py, which totals them by thread and by part of the server.
folded=${out%.svg}.folded
python3 - "$work/folded" >"$folded" <<'PY'
import re, sys
generic = re.compile(r'(?<=[A-Za-z0-9_])<[^<>;]*>')
for line in open(sys.argv[1]):
    previous = None
    while previous != line:
        previous, line = line, generic.sub('', line)
    sys.stdout.write(line)
PY
inferno-flamegraph --minwidth 2 --title "leasekit serve, $clients clients" <"$folded" >"$out"
python3 bench/profile_shares.py "$folded"
echo "flame graph: $out; folded stacks: $folded"
