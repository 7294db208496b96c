"""Pay per call from a wallet, with no API key (pip install './clients/python[x402]').

    cargo run --release --bin leasekit -- serve &       # local facilitator: no money moves
    python3 examples/python/pay_per_call.py

The wallet is the tenant. Each call is paid once, even when its answer is lost and it is retried
(the payment carries an x402 payment identifier and is resent unchanged).
"""

import os

from eth_account import Account

from leasekit import Client

# A throwaway wallet: the local server's facilitator checks signatures but moves no money. Against
# a real deployment, load a funded key instead (LEASEKIT_WALLET_KEY).
key = os.environ.get("LEASEKIT_WALLET_KEY")
wallet = Account.from_key(key) if key else Account.create()
client = Client(os.environ.get("LEASEKIT_URL", "http://127.0.0.1:3000"), account=wallet)

lease = client.acquire("deploy:prod", holder=f"example-{os.getpid()}", ttl=30)
print(f"granted: {lease.granted}, fencing token {lease.token}, paid by {wallet.address}")
client.release("deploy:prod", holder=lease.holder or "", token=lease.token)
print("released:", client.get("deploy:prod").holder is None)
