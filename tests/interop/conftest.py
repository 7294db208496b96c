"""Shared pytest fixtures: a real `leasekit serve` on a free loopback port, with one API key."""

import os
import subprocess
import tempfile

import pytest

BIN = os.environ.get("LEASEKIT_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "leasekit"))
API_KEY = "interop-key-0123456789"


@pytest.fixture(scope="module")
def server():
    """The base URL of a fresh server (own data dir), stopped with SIGTERM after the module."""
    process = subprocess.Popen(
        [BIN, "serve", "--addr", "127.0.0.1:0", "--data-dir", tempfile.mkdtemp(), "--api-key", f"acme:{API_KEY}"],
        stdout=subprocess.PIPE,
        env={**os.environ, "RUST_LOG": "error"},
        text=True,
    )
    url = process.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    yield url
    process.terminate()
    assert process.wait(timeout=10) == 0
