"""examples/python/hold_a_lease.py runs as written, with the installed package."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import API_KEY, ROOT


def test_the_hold_a_lease_example(server: str) -> None:
    env = {**os.environ, "LEASEKIT_URL": server, "LEASEKIT_API_KEY": API_KEY}
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "python", "hold_a_lease.py")],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "step 2 under fencing token 1" in out.stdout, out.stdout
    assert "released: True" in out.stdout, out.stdout


def test_the_pay_per_call_example(server: str) -> None:
    env = {**os.environ, "LEASEKIT_URL": server}
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "python", "pay_per_call.py")],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "granted: True, fencing token 1, paid by 0x" in out.stdout, out.stdout
    assert "released: True" in out.stdout, out.stdout


def test_the_semaphore_and_set_example(server: str) -> None:
    env = {**os.environ, "LEASEKIT_URL": server, "LEASEKIT_API_KEY": API_KEY}
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "python", "semaphore_and_set.py")],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    for line in ["two permits at once: tokens 1 and 2", "a third worker waits", "b current: True",
                 "both accounts held: [1, 1]", "released: True"]:
        assert line in out.stdout, out.stdout


def test_the_session_example(server: str) -> None:
    env = {**os.environ, "LEASEKIT_URL": server, "LEASEKIT_API_KEY": API_KEY}
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "python", "session.py")],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    for line in ["holds 3 tasks, tokens [1, 1, 1]", "under fencing token 1",
                 "held by agent-1", "closed: every task free again: True"]:
        assert line in out.stdout, out.stdout


def test_the_work_queue_example(server: str) -> None:
    env = {**os.environ, "LEASEKIT_URL": server, "LEASEKIT_API_KEY": API_KEY}
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "python", "work_queue.py")],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "6 tasks, each done once: True" in out.stdout, out.stdout
    assert "is finished: fixed by agent-" in out.stdout, out.stdout
