"""Leader election with real processes: five candidates (election_candidate.py, each its own
Python process on this client) campaign for one resource while the test kills the leader
(kill -9) or pauses it (SIGSTOP) past its 2 s lease, again and again for a minute, replacing the
killed. An observer, `leasekit watch` in its own process, prints each change.

What must hold: the observer shows every leader, in order, each with a larger token; never two
at once; never one whose permit had lapsed when the line arrived; and every paused leader's
proclaim after it woke is refused by the service."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from typing import Any

from conftest import API_KEY, BIN
from test_client import name

CANDIDATE = os.path.join(os.path.dirname(__file__), "election_candidate.py")
#: How long the leaders are killed and paused for.
RUN_SECONDS = 60.0


class Lines:
    """A process whose stdout JSON lines are collected, each with its arrival time."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.lines.append((time.time(), json.loads(line)))
                self._changed.notify_all()

    def wait_for(self, test: Any, timeout: float) -> dict[str, Any] | None:
        """The first line `test` accepts, waiting up to `timeout` seconds for it."""
        give_up = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((line for _, line in self.lines if test(line)), None)
                left = give_up - time.monotonic()
                if found is not None or left <= 0:
                    return found
                self._changed.wait(left)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


def expiry(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(line["expiresAt"].replace("Z", "+00:00")).timestamp()


def test_five_candidates_while_leaders_are_killed_and_paused(server: str) -> None:
    tenant = name("t")
    resource = name("office")
    env = {**os.environ, "LEASEKIT_URL": server, "LEASEKIT_API_KEY": API_KEY, "LEASEKIT_TENANT": tenant}
    observer = Lines([BIN, "watch", "--resource", resource], env)
    candidates: dict[str, Lines] = {}

    def spawn(holder: str) -> None:
        candidates[holder] = Lines([sys.executable, CANDIDATE, server, API_KEY, tenant, resource, holder], env)

    def leader_after(token: int, timeout: float = 10.0) -> dict[str, Any]:
        line = observer.wait_for(lambda l: (l.get("fencingToken") or 0) > token, timeout)
        assert line is not None, f"no leader after token {token} within {timeout} s: {observer.lines[-3:]}"
        return line

    paused: list[tuple[str, int]] = []
    killed = 0
    try:
        for n in range(5):
            spawn(f"c{n}")
        leader = leader_after(0)
        end = time.monotonic() + RUN_SECONDS
        rounds = 0
        while time.monotonic() < end:
            time.sleep(0.5)
            holder, token = leader["holder"], leader["fencingToken"]
            target = candidates[holder].process
            if rounds % 2 == 0:
                target.kill()
                target.wait(10)
                killed += 1
                spawn(f"c{5 + killed}")
                leader = leader_after(token)
            else:
                target.send_signal(signal.SIGSTOP)
                leader = leader_after(token)
                target.send_signal(signal.SIGCONT)
                paused.append((holder, token))
            rounds += 1
        assert rounds >= 10, rounds
        # Each woken leader tries to proclaim with its old token: the service refuses it.
        for holder, token in paused:
            refused = candidates[holder].wait_for(lambda l: l["event"] == "refused" and l["token"] == token, 10)
            assert refused is not None, f"{holder} proclaimed with token {token} after waking, and was not refused"
        time.sleep(0.5)
    finally:
        observer.stop()
        for candidate in candidates.values():
            candidate.process.send_signal(signal.SIGCONT)
            candidate.stop()

    # The observer's stream: every change, in order, never two leaders, never a lapsed one.
    shown = [(at, line) for at, line in observer.lines if line["holder"] is not None]
    tokens = [line["fencingToken"] for _, line in shown]
    assert tokens == sorted(tokens), tokens
    holders_of: dict[int, str] = {}
    for at, line in shown:
        assert len(line["holders"]) == 1, line
        assert holders_of.setdefault(line["fencingToken"], line["holder"]) == line["holder"], line
        assert at < expiry(line), f"shown {at - expiry(line):.3f} s after its permit lapsed: {line}"
    elected = sorted(line["token"] for c in candidates.values() for _, line in c.lines if line["event"] == "elected")
    assert sorted(holders_of) == elected, (sorted(holders_of), elected)
    assert len(elected) >= 10
    errors = [line for c in candidates.values() for _, line in c.lines if line["event"] == "error"]
    assert not errors, errors
