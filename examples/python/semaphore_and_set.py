"""A semaphore, a set and a check, with the Python client (pip install ./clients/python).

    cargo run --release --bin leasekit -- serve --api-key dev:dev-key-0123456789 &
    python3 examples/python/semaphore_and_set.py

Up to 2 workers may render at once (a semaphore, a fencing token per permit); a transfer takes
both accounts or neither (a set); a store that cannot keep the highest token asks `check`.
"""

import os

from leasekit import Client, NotAcquired

client = Client(os.environ.get("LEASEKIT_URL", "http://127.0.0.1:3000"),
                api_key=os.environ.get("LEASEKIT_API_KEY", "dev-key-0123456789"), tenant="examples")
run = os.getpid()

with client.lease(f"render-pool-{run}", holder="worker-a", ttl=10, limit=2) as a, \
        client.lease(f"render-pool-{run}", holder="worker-b", ttl=10, limit=2) as b:
    print(f"two permits at once: tokens {a.token} and {b.token}")
    try:
        with client.lease(f"render-pool-{run}", holder="worker-c", limit=2):
            print("a third permit: should not happen")
    except NotAcquired:
        print("a third worker waits: both permits are held")
    # Before a write, the store asks whether b's token is still a live permit.
    print("b current:", client.check(f"render-pool-{run}", b.token, holder="worker-b").current)

accounts = [f"account:alice-{run}", f"account:bob-{run}"]
with client.lease_all(accounts, holder="transfer-17", ttl=10) as both:
    print("both accounts held:", sorted(both.tokens.values()))
print("released:", not client.get(accounts[0]).granted and not client.get(accounts[1]).granted)
