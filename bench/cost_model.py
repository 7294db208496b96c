"""AWS cost per million calls of each lease path, from the measured DynamoDB usage.

Round trips and capacity units come from the usage test (shared/tests/usage.rs), run here against
the embedded store, which bills capacity by DynamoDB's rules. Prices are us-east-1 list prices
(below, with their date); durations are modelled from the round trips, because this machine has
no AWS: a deployed answer is the handler's CPU (about 60 µs with signing, see answer_cpu) plus
DynamoDB's latency, billed by the millisecond.

Reproduce: python3 bench/cost_model.py [--ms-per-round-trip 5] [--memory-mb 256]
"""

import argparse
import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# us-east-1 list prices, USD, read from the AWS pricing pages (2026-11).
PRICES = {
    "dynamodb_write_per_million": 0.625,  # on-demand write request unit
    "dynamodb_read_per_million": 0.125,  # on-demand read request unit
    "lambda_request_per_million": 0.20,
    "lambda_arm64_gb_second": 0.0000133334,
    "apigw_rest_per_million": 3.50,  # REST API, first 333 million a month
    "logs_ingest_per_gb": 0.50,  # CloudWatch Logs, one JSON line per request
}
LOG_LINE_BYTES = 350
PRICE_PER_CALL_USDC = 0.005  # the seeds' price


def measured_usage():
    out = subprocess.run(
        ["cargo", "test", "-q", "-p", "leasekit-core", "--test", "usage", "--", "--nocapture"],
        cwd=ROOT, check=True, capture_output=True, text=True,
        env={k: v for k, v in os.environ.items() if k != "LEASEKIT_TEST_DYNAMODB_ENDPOINT"},
    ).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\|\s*(.+?)\s*\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|\s*([\d.]+)\s*\|$", line)
        if m:
            rows.append((m[1], int(m[2]), float(m[3]), float(m[4])))
    if not rows:
        raise SystemExit("the usage test printed no table:\n" + out)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ms-per-round-trip", type=float, default=5.0,
                        help="DynamoDB latency seen from Lambda in the same region")
    parser.add_argument("--handler-ms", type=float, default=1.0,
                        help="everything else in an invocation (CPU ~0.06 ms, runtime, logging)")
    parser.add_argument("--memory-mb", type=int, default=256)
    args = parser.parse_args()
    p = PRICES
    gb = args.memory_mb / 1024
    print(f"Per million calls, USD; Lambda arm64 {args.memory_mb} MB; "
          f"{args.ms_per_round_trip:g} ms per DynamoDB round trip + {args.handler_ms:g} ms\n")
    print("| path | round trips | RRU | WRU | ms billed | DynamoDB | Lambda | API Gateway "
          "| logs | total | share of price |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    price = PRICE_PER_CALL_USDC * 1e6
    for path, trips, rru, wru in measured_usage():
        ms = -(-(args.handler_ms + trips * args.ms_per_round_trip) // 1)  # billed per 1 ms
        dynamodb = wru * p["dynamodb_write_per_million"] + rru * p["dynamodb_read_per_million"]
        lam = p["lambda_request_per_million"] + 1e6 * gb * ms / 1000 * p["lambda_arm64_gb_second"]
        apigw = p["apigw_rest_per_million"]
        logs = 1e6 * LOG_LINE_BYTES / 1e9 * p["logs_ingest_per_gb"]
        total = dynamodb + lam + apigw + logs
        print(f"| {path} | {trips} | {rru:g} | {wru:g} | {ms:.0f} | {dynamodb:.3f} | {lam:.3f} "
              f"| {apigw:.2f} | {logs:.3f} | {total:.2f} | {100 * total / price:.3f}% |")
    print(f"\nPrice: {PRICE_PER_CALL_USDC} USDC a call = {price:,.0f} USD per million calls.")


if __name__ == "__main__":
    main()
