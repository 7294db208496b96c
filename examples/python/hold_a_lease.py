"""Hold a lease while work runs, with the Python client (pip install ./clients/python).

    cargo run --release --bin leasekit -- serve --api-key dev:dev-key-0123456789 &
    python3 examples/python/hold_a_lease.py
"""

import os
import time

from leasekit import Client, NotAcquired

client = Client(os.environ.get("LEASEKIT_URL", "http://127.0.0.1:3000"),
                api_key=os.environ.get("LEASEKIT_API_KEY", "dev-key-0123456789"), tenant="examples")
try:
    with client.lease("report:nightly", holder=f"example-{os.getpid()}", ttl=5, wait=2) as held:
        for step in range(3):
            held.check()  # stop before the lease could be someone else's
            print(f"step {step} under fencing token {held.token}")
            time.sleep(2)  # longer than a third of the TTL: the lease renews meanwhile
except NotAcquired as e:
    print(f"someone else has it: {e.holder}")
print("released:", client.get("report:nightly").holder is None)
