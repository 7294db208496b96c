"""Shared pytest fixtures: the server under test, with one API key.

Two modes:
- Own server (default, LEASEKIT_URL unset): each module starts a real `leasekit serve` on a free
  loopback port with a fresh data dir and the key `acme:interop-key-0123456789`.
- External (LEASEKIT_URL set): an already-running deployment, e.g. the Lambda functions behind
  `sam local start-api`. LEASEKIT_API_KEY is a valid key of some account there, LEASEKIT_TARGET
  says what runs it (`serve`, the default, or `sam-local`, whose known differences
  test_known_differences.py pins). The deployment's public URL must equal LEASEKIT_URL.

External data persists across runs, so tests name what they create with `unique()` (a random
suffix per run) and never assume an empty store, the account name, or a process they control:
those tests call `needs_own_server(why)`, which skips them in external mode, saying why.
"""

import os
import secrets
import subprocess
import tempfile

import pytest

BIN = os.environ.get("LEASEKIT_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "leasekit"))

EXTERNAL_URL = os.environ.get("LEASEKIT_URL", "").rstrip("/") or None
TARGET = os.environ.get("LEASEKIT_TARGET", "serve")
TARGETS = ("serve", "sam-local")
if TARGET not in TARGETS:
    raise pytest.UsageError(f"LEASEKIT_TARGET must be one of {TARGETS}, not {TARGET!r}")
if TARGET != "serve" and not EXTERNAL_URL:
    raise pytest.UsageError(f"LEASEKIT_TARGET={TARGET} needs LEASEKIT_URL (the running deployment)")
if EXTERNAL_URL and not os.environ.get("LEASEKIT_API_KEY"):
    raise pytest.UsageError("LEASEKIT_URL is set: LEASEKIT_API_KEY must be a valid API key of that deployment")

EXTERNAL = EXTERNAL_URL is not None
SAM_LOCAL = TARGET == "sam-local"
API_KEY = os.environ["LEASEKIT_API_KEY"] if EXTERNAL else "interop-key-0123456789"
#: The same account's key with the admin role (revoke, audit), on servers this suite starts.
ADMIN_KEY = "interop-admin-key-0123456789"

# One per test session: names made with it are new to any store, so reruns start clean.
RUN = secrets.token_hex(4)


def unique(name: str) -> str:
    """`name` made unique to this test run (valid in every id pattern of the contract)."""
    return f"{name}-{RUN}"


def needs_own_server(why: str) -> None:
    """Skip in external mode: the test needs the server process itself (`why` says for what)."""
    if EXTERNAL:
        pytest.skip(f"needs its own `leasekit serve` ({why}); LEASEKIT_URL points at a deployment")


def start_serve(*args, env=None, stderr=None, data_dir=None):
    """A real `leasekit serve` on a free port with `data_dir` (default: a fresh one): (process, url)."""
    process = subprocess.Popen(
        [BIN, "serve", "--addr", "127.0.0.1:0", "--data-dir", data_dir or tempfile.mkdtemp(), "--api-key", f"acme:{API_KEY}",
         "--admin-key", f"acme:{ADMIN_KEY}", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        env={**os.environ, "RUST_LOG": "error", **(env or {})},
        text=True,
    )
    url = process.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    return process, url


def stop_serve(process) -> None:
    """SIGTERM, and the server must stop cleanly."""
    process.terminate()
    assert process.wait(timeout=10) == 0


@pytest.fixture(scope="module")
def server():
    """The base URL under test: LEASEKIT_URL, or a fresh server (own data dir) for this module,
    stopped with SIGTERM after it."""
    if EXTERNAL:
        yield EXTERNAL_URL
        return
    process, url = start_serve()
    yield url
    stop_serve(process)
