"""A real `leasekit serve` for the client's tests (LEASEKIT_BIN, else the debug build), and a
TCP proxy in front of it that can go silent: it keeps accepting and reading, and answers nothing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
BIN = os.environ.get("LEASEKIT_BIN", os.path.join(ROOT, "target", "debug", "leasekit"))
API_KEY = "python-client-key-0123456789"
ADMIN_KEY = "python-admin-key-0123456789"


def running(*args: str) -> Iterator[str]:
    """`leasekit ARGS...` (a command that prints its URL first: serve, local-aws) while the
    fixture lives: its URL."""
    process = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, env={**os.environ, "RUST_LOG": "error"})
    assert process.stdout is not None
    url = process.stdout.readline().decode().strip()
    assert url.startswith("http://127.0.0.1:"), url
    yield url
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    yield from running("serve", "--addr", "127.0.0.1:0", "--data-dir", tempfile.mkdtemp(), "--api-key",
                       f"py:{API_KEY}", "--admin-key", f"py:{ADMIN_KEY}")


class SilentProxy:
    """Forwards loopback TCP to `target` until `silent` is set; from then on every byte either
    way is dropped and nothing is answered (connections stay open: a hung server, not a refusal).
    With `answers_late` (seconds) set instead, requests go through at once and each chunk of an
    answer is delivered that much later (the server acts; the client hears late)."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.silent = threading.Event()
        self.answers_late = 0.0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for source, sink, answers in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pipe, args=(source, sink, answers), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if answers and self.answers_late:
                    time.sleep(self.answers_late)
                if not self.silent.is_set():
                    sink.sendall(chunk)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def proxy(server: str) -> Iterator[SilentProxy]:
    p = SilentProxy(server)
    yield p
    p.close()
