"""One candidate of the election test (test_election_processes.py), as its own process: campaign
for the resource, proclaim a new value every 100 ms while leading, and campaign again once a
proclaim is refused. One JSON line per event on stdout: elected (with its token), refused (a
proclaim of that token refused: no longer the leader). Run: election_candidate.py URL KEY TENANT
RESOURCE HOLDER."""

from __future__ import annotations

import json
import sys
import time

import leasekit
from leasekit import Client


def say(event: str, token: int, **more: object) -> None:
    print(json.dumps({"event": event, "token": token, "at": time.time(), **more}), flush=True)


def main() -> None:
    url, key, tenant, resource, holder = sys.argv[1:6]
    client = Client(url, api_key=key, tenant=tenant)
    while True:
        with client.campaign(resource, holder=holder, value=f"{holder}:0", ttl=2) as lead:
            say("elected", lead.token)
            n = 0
            while True:
                time.sleep(0.1)
                n += 1
                try:
                    # Sent whatever this process believes: the service decides (a paused
                    # leader that wakes up must be refused, not trusted to notice).
                    lead.proclaim(f"{holder}:{n}")
                except leasekit.LeaseLost:
                    say("refused", lead.token)
                    break
                except leasekit.LeasekitError as e:
                    say("error", lead.token, error=str(e))


if __name__ == "__main__":
    main()
