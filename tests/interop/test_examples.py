"""The documented examples run as written against a real server."""

import os
import subprocess
import sys

from conftest import API_KEY

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_the_python_fenced_writes_example(server):
    env = {**os.environ, "LEASEKIT_URL": server, "LEASEKIT_API_KEY": API_KEY}
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "python", "fenced_writes.py")],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "stale fencing token" in out.stdout
    assert "granted=False (NOT_HOLDER)" in out.stdout, "B holds it now: A is not the holder"
    assert "store holds 'written by B'" in out.stdout
