"""leasekit: leases with fencing tokens, from Python.

    from leasekit import Client
    client = Client("http://127.0.0.1:3000", api_key="dev-key-0123456789", tenant="team-a")
    with client.lease("deploy:prod", holder="worker-1", ttl=30) as lease:
        do_work(fencing_token=lease.token)   # stop when lease.lost turns true

    # Many holds on one heartbeat: a session, closed on exit; one loss for all of them.
    with client.session(holder="agent-1", ttl=30) as session:
        for task in ("task:1", "task:2"):
            work_on(task, fencing_token=session.acquire(task))   # stop when session.lost

    # A work queue: take the first free task, finish it with its result; a finished task is
    # never handed out again (`Finished` says who did it).
    with client.claim_next(["task:1", "task:2", "task:3"], holder="worker-1") as task:
        task.finish(do_task(task.resource, fencing_token=task.token))

    # Or pay per call from a wallet (pip install 'leasekit[x402]'): the wallet is the tenant.
    client = Client("http://127.0.0.1:3000", account=eth_account.Account.from_key(key))
"""

from ._aio import AsyncClient, AsyncHeldLease, AsyncHeldSession
from ._client import Client, HeldLease, HeldSession
from ._errors import (
    Finished,
    Forbidden,
    IdempotencyConflict,
    InvalidInput,
    LeaseLost,
    LeasekitError,
    NotAcquired,
    PayloadTooLarge,
    PaymentIdentifierConflict,
    PaymentInProgress,
    PaymentRequired,
    RateLimited,
    ServiceError,
    StoreUnavailable,
    Unauthorized,
    Unavailable,
)
from ._model import (AuditEntry, Done, Leader, Lease, Member, Page, Permit, SessionPermit, SessionState, Waiter,
                     safety_margin)

__all__ = [
    "AsyncClient", "AsyncHeldLease", "AsyncHeldSession", "AuditEntry", "Client", "Done", "HeldLease", "HeldSession",
    "Leader", "Lease", "Member", "Page", "Permit", "SessionPermit", "SessionState", "Waiter", "safety_margin",
    "Finished", "Forbidden", "IdempotencyConflict", "InvalidInput", "LeaseLost", "LeasekitError", "NotAcquired",
    "PayloadTooLarge", "PaymentIdentifierConflict", "PaymentInProgress", "PaymentRequired", "RateLimited", "ServiceError", "StoreUnavailable",
    "Unauthorized", "Unavailable",
]
