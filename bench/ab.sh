#!/bin/bash
# Alternate builds (or settings) of `leasekit serve` under the same load, a fresh server and data
# dir per run, and print each run's cycles/s, p50 and p99 (ms), errors, and the server's CPU per
# granted cycle (user + system, from /proc/<pid>/stat). On a VM whose speed moves from minute to
# minute, judge a change on the pairs of one round, not on one figure (BENCHMARKS.md).
#
# usage: bench/ab.sh CLIENTS SECONDS ROUNDS 'NAME|ENV|BINARY' ...
#   ENV is one VAR=value for the server (e.g. RUST_LOG=warn), or - for none.
# e.g.:  cp target/release/leasekit /tmp/before   # build the change, then:
#        bench/ab.sh 64 5 4 'before|-|/tmp/before' 'after|-|target/release/leasekit'
# Needs the load generator: cargo build --release -p loadgen.
set -euo pipefail
cd "$(dirname "$0")/.."
clients=$1 seconds=$2 rounds=$3
shift 3
key=$(python3 -c 'import sys; sys.path.insert(0, "bench"); import versus; print(versus.API_KEY)')
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
for round in $(seq 1 "$rounds"); do
  for spec in "$@"; do
    IFS='|' read -r name env binary <<< "$spec"
    [ "$env" = "-" ] && env="LEASEKIT_AB=1"
    dir=$(mktemp -d)
    port=$(free_port)
    env "$env" "$binary" serve --addr "127.0.0.1:$port" --data-dir "$dir/store" \
      --api-key "bench:$key" > /dev/null 2> "$dir/log" &
    server=$!
    for _ in $(seq 1 100); do
      (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null && break
      sleep 0.05
    done
    result=$(target/release/loadgen --system leasekit --url "http://127.0.0.1:$port" \
      --clients "$clients" --seconds "$seconds" --api-key "$key" --label "$name")
    ticks=$(awk '{print $14 + $15}' "/proc/$server/stat")
    kill "$server"
    wait "$server" 2> /dev/null || true
    rm -rf "$dir"
    echo "$result" | python3 -c '
import json, os, sys
d = json.load(sys.stdin)
cpu = int(sys.argv[2]) / os.sysconf("SC_CLK_TCK")
cycles = d["granted_per_s"] * d["seconds"]
rate, p50, p99, errors = (d[k] for k in ("granted_per_s", "p50_ms", "p99_ms", "errors"))
print("round %s  %-10s %8.0f cycles/s  p50 %.2f  p99 %.2f ms  errors %d  server CPU %.0f us/cycle"
      % (sys.argv[1], sys.argv[3], rate, p50, p99, errors, cpu / cycles * 1e6))
' "$round" "$ticks" "$name"
  done
done
