"""Cold start and size of each Lambda function, measured on the real release binaries.

Init time: from spawning `target/release/<function>` to its first `GET .../invocation/next`,
i.e. everything the function does before it can take a request (config, AWS clients, reading
the signing key from Secrets Manager, compiling schemas). A stand-in on loopback plays the
Lambda runtime API and Secrets Manager; credentials and region come from the environment, so
nothing waits on IMDS. Size: the binary, and zipped as Lambda receives it.

Reproduce: cargo build --release -p lease -p authorizer -p public -p claim -p claim-free -p mcp
           python3 bench/cold_start.py [--runs 20]
       or, on what `sam build` makes for x86_64 (./tests/run.sh builds arm64 only, and stages
       debug builds in .aws-sam/build-x86_64 for sam local, so build it yourself first):
           sam build --beta-features --parameter-overrides Architecture=x86_64 --build-dir .aws-sam/release-x86_64
           python3 bench/cold_start.py --sam-build .aws-sam/release-x86_64
These are x86_64 figures from this machine; Lambda arm64 builds are produced with cargo-lambda.
"""

import argparse
import http.server
import io
import json
import os
import statistics
import subprocess
import threading
import time
import zipfile

FUNCTIONS = ["lease", "claim", "claim-free", "mcp", "public", "authorizer"]
# Their logical ids in infra/template.yaml: `sam build` names its output folders after them.
SAM_NAMES = {"lease": "LeaseFunction", "claim": "ClaimFunction", "claim-free": "ClaimFreeFunction",
             "mcp": "McpFunction", "public": "PublicFunction", "authorizer": "AuthorizerFunction"}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SEED = "11" * 32


class Stub(http.server.BaseHTTPRequestHandler):
    """Runtime API: the first GET of the next invocation marks the end of init.
    Secrets Manager: GetSecretValue returns the signing key seed."""

    first_next = None
    event = threading.Event()

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.endswith("/runtime/invocation/next"):
            if Stub.first_next is None:
                Stub.first_next = time.perf_counter()
                Stub.event.set()
            time.sleep(5)  # hold it: we only measure init
        self.send_response(404)
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("content-length", 0))
        self.rfile.read(length)
        if self.headers.get("x-amz-target") == "secretsmanager.GetSecretValue":
            body = json.dumps({"ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:k", "Name": "k", "SecretString": SEED}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/x-amz-json-1.1")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(400)
        self.end_headers()


def init_ms(binary, port):
    Stub.first_next = None
    Stub.event.clear()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{port}",
        "AWS_LAMBDA_FUNCTION_NAME": os.path.basename(binary),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
        "_HANDLER": "bootstrap",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": f"http://127.0.0.1:{port}",
        "AWS_LC_SYS_NO_JITTER_ENTROPY": "1",
        "LEASES_TABLE": "l", "REQUESTS_TABLE": "r", "KEYS_TABLE": "k", "PAYMENTS_TABLE": "p", "CLAIMS_TABLE": "c",
        "SIGNING_KEY_SECRET": "arn:aws:secretsmanager:us-east-1:123456789012:secret:k",
        # Required since the docs and the MCP Host check name the deployment (infra/template.yaml).
        "LEASEKIT_PUBLIC_URL": "https://leases.example.com",
    }
    start = time.perf_counter()
    process = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ready = Stub.event.wait(timeout=10)
    process.kill()
    _, err = process.communicate()
    if not ready:
        raise SystemExit(f"{binary} did not finish init: {err.decode()[-500:]}")
    return (Stub.first_next - start) * 1000


def zipped(binary):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(binary, "bootstrap")
    return len(buffer.getvalue())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--sam-build", metavar="DIR",
                        help="time the bootstraps `sam build` made in DIR (e.g. .aws-sam/release-x86_64) "
                             "instead of target/release")
    args = parser.parse_args()
    runs = args.runs
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    print(f"{'function':<12} {'init p50 ms':>12} {'init p90 ms':>12} {'binary MB':>10} {'zip MB':>8}   ({runs} runs each)")
    for name in FUNCTIONS:
        binary = (os.path.join(args.sam_build, SAM_NAMES[name], "bootstrap") if args.sam_build
                  else os.path.join(ROOT, "target", "release", name))
        times = sorted(init_ms(binary, port) for _ in range(runs))
        p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
        mb = os.path.getsize(binary) / 1e6
        print(f"{name:<12} {statistics.median(times):>12.1f} {p90:>12.1f} {mb:>10.1f} {zipped(binary) / 1e6:>8.1f}")
    server.shutdown()


if __name__ == "__main__":
    main()
