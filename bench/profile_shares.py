"""Where a profile's samples went: by thread, and by part of the server.

Usage: python3 bench/profile_shares.py target/profile-16.folded   (bench/profile.sh writes it)

Each sample goes to the first part in PARTS that any frame of its stack names (so signing inside
a request counts as signing, not as the request's handling); a stack naming none of them goes to
the runtime, the kernel or "other" by its frames. Shares are of all the server's samples.
"""

import collections
import re
import sys

PARTS = [
    ("signing (_provenance)", r"LeaseService::sign|provenance::"),
    ("AWS SDK pipeline", r"aws_smithy|aws_sdk_dynamodb|aws_runtime|aws_sigv4"),
    ("dynoxide and SQLite", r"dynoxide|sqlite3"),
    ("JSON Schema", r"jsonschema|schema::"),
    ("serde_json", r"serde_json"),
    ("hyper", r"hyper::|hyper_util"),
    ("API keys", r"key_changes|KeyStore|Authenticator"),
    ("lease decisions", r"leasekit_core::lease::"),
    ("rest of a request (axum, tower, our handlers)", r"axum|tower|leasekit_core::http"),
    ("tokio runtime", r"tokio::"),
]
FALLBACK = [("kernel", r"entry_SYSCALL|asm_sysvec|irq|schedule"), ("malloc", r"^mi_|malloc")]


def main(path):
    by_thread, by_part, total = collections.Counter(), collections.Counter(), 0
    parts = [(name, re.compile(p)) for name, p in PARTS + FALLBACK]
    for line in open(path):
        stack, count = line.rsplit(" ", 1)
        count = int(count)
        frames = stack.split(";")
        total += count
        by_thread[frames[0]] += count
        part = next((name for name, p in parts if any(p.search(f) for f in frames)), "other")
        by_part[part] += count
    print("| thread | share |\n|---|---:|")
    for name, n in by_thread.most_common(6):
        print(f"| {name} | {100 * n / total:.1f}% |")
    print("\n| part | share |\n|---|---:|")
    for name, n in by_part.most_common():
        print(f"| {name} | {100 * n / total:.1f}% |")


if __name__ == "__main__":
    main(sys.argv[1])
