"""The blocking client, and a lease held by a background thread: the I/O that the machines in
`_core` ask for, done with httpx.Client, time.sleep and threading."""

from __future__ import annotations

import math
import threading
import time
from types import TracebackType
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from ._core import (PATH, Acquire, Hold, Outcome, Pause, Pay, Release, Renew, Renewal, Send,
                    SessionHold, Settings, Wait, unanswered)
from ._errors import InvalidInput, LeasekitError
from ._model import Leader, Lease, Page, SessionState, body, leader_of, new_request_id, set_leases
from ._x402 import Payer


class Client(Settings):
    """A leasekit client over HTTP, with an API key (`tenant` names the key's namespace), or
    paying per call over x402 from `account`, an `eth_account` account (the wallet is the
    tenant; needs `pip install 'leasekit[x402]'`).

    Every mutation carries a request id, generated once and kept across that call's own retries
    (no answer, a 502, a 5xx, a 429), so a retry never applies twice. A paid call's payment is
    made once and resent on those retries, named with a payment identifier, so it is charged
    once (see `_x402`). `deadline` (a `time.monotonic()` instant) bounds a call and its retries.
    """

    def __init__(self, url: str, *, api_key: str | None = None, account: Any = None, tenant: str = "default",
                 timeout: float = 10.0, retries: int = 3, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(url, api_key=api_key, account=account, tenant=tenant, timeout=timeout, retries=retries)
        self._payer = Payer(account) if account is not None else None
        self._http = httpx.Client(base_url=self._url, headers=self._headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def acquire(self, resource: str, *, holder: str, ttl: int = 30, limit: int | None = None,
                wait: int = 0, value: str | None = None, request_id: str | None = None, deadline: float | None = None) -> Lease:
        """Acquire `resource` for `ttl` seconds; `granted` says whether you hold it now. With
        `limit` (1-64), one of that many permits (a semaphore), each with its own token. With `wait` (0-20 s), a
        caller who is not granted at once waits in the resource's queue (first come, first served)
        and is answered as soon as the permit is its own, or when the wait ends ungranted with its
        `queue_position`."""
        return self._call(body("acquire", resource, self.tenant, holder=holder, ttl=ttl, limit=limit,
                               wait=wait or None, value=value, request_id=request_id or new_request_id()), deadline)

    def acquire_all(self, resources: Sequence[str], *, holder: str, ttl: int = 30, limit: int | None = None,
                    request_id: str | None = None, deadline: float | None = None) -> Lease:
        """Acquire every one of `resources` (2-50) or none of them, in one transaction; `leases`
        has each one's token."""
        return self._call(body("acquire", None, self.tenant, resources=list(resources), holder=holder, ttl=ttl,
                               limit=limit, request_id=request_id or new_request_id()), deadline)

    def renew_all(self, leases: Sequence[tuple[str, int]], *, holder: str, ttl: int = 30,
                  request_id: str | None = None, deadline: float | None = None) -> Lease:
        """Renew a whole set, each (resource, token): all or none."""
        return self._call(body("renew", None, self.tenant, leases=set_leases(leases), holder=holder, ttl=ttl,
                               request_id=request_id or new_request_id()), deadline)

    def release_all(self, leases: Sequence[tuple[str, int]], *, holder: str, request_id: str | None = None,
                    deadline: float | None = None) -> Lease:
        """Release a whole set, each (resource, token): all or none."""
        return self._call(body("release", None, self.tenant, leases=set_leases(leases), holder=holder,
                               request_id=request_id or new_request_id()), deadline)

    def check(self, resource: str, token: int, *, holder: str | None = None,
              deadline: float | None = None) -> Lease:
        """Whether `token` (of `holder`, if given) is a live permit of `resource`: `current`. The
        fence for a store that cannot keep its own highest token, and the only one for a
        semaphore (its permits' tokens are not ordered by who holds now)."""
        return self._call(body("check", resource, self.tenant, token=token, holder=holder), deadline)

    def renew(self, resource: str, *, holder: str, token: int, ttl: int = 30,
              value: str | None = None, request_id: str | None = None, deadline: float | None = None) -> Lease:
        """Extend a lease you hold to `ttl` seconds from now; refused once it has lapsed."""
        return self._call(body("renew", resource, self.tenant, holder=holder, token=token, ttl=ttl,
                               value=value, request_id=request_id or new_request_id()), deadline)

    def release(self, resource: str, *, holder: str, token: int, done: bool = False, result: str | None = None,
                keep_done: int | None = None, request_id: str | None = None,
                deadline: float | None = None) -> Lease:
        """Release a lease you hold. With `done`, the resource is finished: nobody is granted it
        for `keep_done` seconds (default a week) unless someone reopens it, and every acquire is
        told who finished it and `result` (0-1024 bytes); `done` in the answer is the mark."""
        return self._call(body("release", resource, self.tenant, holder=holder, token=token,
                               done=True if done else None, result=result, keep_done=keep_done,
                               request_id=request_id or new_request_id()), deadline)

    def reopen(self, resource: str, *, reason: str, holder: str | None = None, token: int | None = None,
               request_id: str | None = None, deadline: float | None = None) -> Lease:
        """End `resource`'s finished mark early, with `reason` kept in the audit: as its finisher
        (`holder` and the `token` it finished with) or, naming none, with an admin key or the
        paying wallet (else `Forbidden`). The next grant's token continues from the counter."""
        return self._call(body("reopen", resource, self.tenant, holder=holder, token=token, reason=reason,
                               request_id=request_id or new_request_id()), deadline)

    def revoke(self, resource: str, *, reason: str, holder: str | None = None, token: int | None = None,
               request_id: str | None = None, deadline: float | None = None) -> Lease:
        """End `holder`'s permit of `resource` (every permit when None) at once, with `reason`
        (1-200 characters) kept in the audit; with `token`, only the permit with that token (a
        newer one of the same holder is left alone). An API key with the admin role, or a paying
        wallet in its own tenant (else `Forbidden`). `revoked` lists what it ended; not granted
        (NO_HOLD) when nothing was live. The revoked holder's next renew fails with REVOKED."""
        return self._call(body("revoke", resource, self.tenant, holder=holder, token=token, reason=reason,
                               request_id=request_id or new_request_id()), deadline)

    def revoke_session(self, session: str, *, reason: str, request_id: str | None = None,
                       deadline: float | None = None) -> Lease:
        """End `session` and every permit in it at once, with `reason` kept in the audit (the
        callers `revoke` allows). `revoked` lists the permits it ended; not granted
        (SESSION_EXPIRED) when it had ended already."""
        return self._call(body("revoke", None, self.tenant, session=session, reason=reason,
                               request_id=request_id or new_request_id()), deadline)

    def get_session(self, session: str, *, deadline: float | None = None) -> SessionState | None:
        """`session` as it stands (its live permits in `leases`); None once it has ended."""
        return (self._call(body("get", None, self.tenant, session=session), deadline)).session

    def list(self, *, prefix: str | None = None, cursor: str | None = None, page_size: int | None = None,
             deadline: float | None = None) -> Page:
        """A page of your tenant's resources with a live permit or waiter, by name (advisory:
        a grant shows within about 2 s). Pass `next_cursor` back as `cursor` for the next page."""
        answer = self._call(body("list", None, self.tenant, prefix=prefix, cursor=cursor,
                                  page_size=page_size), deadline)
        return answer.page()

    def audit(self, *, resource: str | None = None, cursor: str | None = None, page_size: int | None = None,
              deadline: float | None = None) -> Page:
        """A page of the revoke audit, newest first (`entries`): an admin key's or wallet's."""
        answer = self._call(body("audit", resource, self.tenant, cursor=cursor, page_size=page_size),
                             deadline)
        return answer.page()

    def get(self, resource: str, *, deadline: float | None = None) -> Lease:
        """Who holds `resource` now."""
        return self._call(body("get", resource, self.tenant), deadline)

    def watch(self, resource: str, *, state_tag: str | None = None, wait: int = 20,
              deadline: float | None = None) -> Lease:
        """`resource` once its state is no longer the one `state_tag` names (at once without one,
        `changed` true), or when `wait` seconds (0-20) have passed (`changed` false)."""
        return self._call(body("watch", resource, self.tenant, state_tag=state_tag, wait=wait), deadline)

    def leader(self, resource: str, *, deadline: float | None = None) -> Leader | None:
        """Who leads `resource` now: its holder, token and value (None when nobody does)."""
        return leader_of(self._call(body("get", resource, self.tenant), deadline))

    def observe(self, resource: str, *, wait: int = 20) -> Iterator[Leader | None]:
        """The leader of `resource` as it stands, then each time it changes (a new leader, a new
        value, or nobody: None), from watches chained on the state's tag. Every leader it yields
        held a live permit when its answer was made (a lapse is a change: it never yields one
        whose permit lapsed), and it never skips the last change. Runs until you stop iterating."""
        tag: str | None = None
        while True:
            answer = self.watch(resource, state_tag=tag, wait=wait)
            if answer.changed:
                yield leader_of(answer)
            tag = answer.state_tag

    def campaign(self, resource: str, *, holder: str, value: str, ttl: int = 30,
                 wait: float = math.inf) -> HeldLease:
        """Lead `resource` while a `with` block runs: wait (up to `wait` seconds,
        by default until elected) in its queue, then hold it with `value` (your address), renewed
        in the background; `proclaim(value)` changes the value while you lead; leaving the block
        resigns. `lost` says when you may no longer be the leader."""
        return HeldLease(self, (resource,), holder=holder, ttl=ttl, wait=wait, limit=1, value=value)

    def lease(self, resource: str, *, holder: str, ttl: int = 30, wait: float = 0.0,
              limit: int = 1) -> HeldLease:
        """Hold `resource` (one of `limit` permits) while a `with` block runs (see `HeldLease`)."""
        return HeldLease(self, (resource,), holder=holder, ttl=ttl, wait=wait, limit=limit)

    def claim_next(self, candidates: Sequence[str], *, holder: str, ttl: int = 30) -> HeldLease:
        """Hold the first of `candidates` (2-50 distinct names, in the order given) that can be
        granted now while a `with` block runs: not held to its limit, not finished, nobody
        waiting ahead (`resource` and `token` name the one won). `NotAcquired` when none is free
        now; `Finished` when every one is finished. Finish it with `finish(result)`."""
        return HeldLease(self, tuple(candidates), holder=holder, ttl=ttl, wait=0.0, limit=1, candidates=True)

    def lease_all(self, resources: Sequence[str], *, holder: str, ttl: int = 30, wait: float = 0.0,
                  limit: int = 1) -> HeldLease:
        """Hold every one of `resources` (2-50) while a `with` block runs: taken together,
        renewed together in the background, released together; one `lost` for the whole set
        (`tokens` has each one's token)."""
        return HeldLease(self, tuple(resources), holder=holder, ttl=ttl, wait=wait, limit=limit)

    def session(self, *, holder: str, ttl: int = 30) -> HeldSession:
        """Open a session for `holder` while a `with` block runs (see `HeldSession`): one
        keepalive for any number of holds, one loss for all of them, closed on exit."""
        return HeldSession(self, holder=holder, ttl=ttl)

    def _call(self, request: dict[str, Any], deadline: float | None) -> Lease:
        call = self._new_call(request, deadline)
        outcome: httpx.Response | str | LeasekitError | None = None
        while not isinstance(step := call.next(outcome), Lease):
            outcome = self._do(step)
        return step

    def _do(self, step: Send | Pay | Pause) -> httpx.Response | str | LeasekitError | None:
        if isinstance(step, Pause):
            time.sleep(step.seconds)
            return None
        try:
            if isinstance(step, Pay):
                assert self._payer is not None, "only a paying call pays"
                return self._payer.pay(step.offer)
            return self._http.post(PATH, json=step.body, timeout=step.timeout, headers=step.headers)
        except httpx.HTTPError as e:
            return unanswered(e)


class HeldLease(Hold[Client]):
    """A lease held while a `with` block runs, renewed in the background.

    On entry it acquires (trying again until `wait` seconds have passed, then raising
    `NotAcquired`); a thread renews a third of the way to the local deadline (see
    `safety_margin`); on exit it stops renewing and releases. Nothing it says counts past the
    local deadline: `lost` turns true when a renewal is refused or none got through before it,
    `check()` raises `LeaseLost` then, and `wait_lost(timeout)` waits for it. Stop the work when
    `lost` turns true: past the deadline another holder may have the resource (and a larger
    `token`, which is what fences your late writes).
    """

    def __init__(self, client: Client, resources: tuple[str, ...], *, holder: str, ttl: int, wait: float,
                 limit: int, value: str | None = None, candidates: bool = False) -> None:
        # The lock of the renewal, which the renewing thread steps and the caller's thread reads.
        self._changed = threading.Condition()
        super().__init__(client, resources, holder=holder, ttl=ttl, wait=wait, limit=limit, value=value,
                         guard=self._changed, candidates=candidates)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> HeldLease:
        acquisition = self._acquisition()
        outcome: Outcome = None
        while not isinstance(step := acquisition.next(outcome), Renewal):
            outcome = self._do(step)
        self._held(acquisition, step)
        self._thread = threading.Thread(target=self._renew, args=(step,), name=f"leasekit-renew-{self.resource}",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()
        with self._changed:
            ending = self._renewal.ending_after_loss() if self._renewal is not None else None
        if ending is not None:
            self._do(ending)

    def _lost_now(self) -> None:
        self._changed.notify_all()

    def proclaim(self, value: str) -> Lease:
        """Change the value while you lead (a renew with it); `LeaseLost` when the token is no
        longer a live permit's: someone else leads, or nobody."""
        answer = self._client.renew(self.resource, holder=self.holder, token=self.token, ttl=self.ttl, value=value)
        return self._proclaimed(value, answer)

    def finish(self, result: str | None = None, *, keep: int | None = None) -> Lease:
        """The work is done: stop renewing and release with done, so that nobody is granted the
        resource again for `keep` seconds (default a week) unless someone reopens it, and every
        acquire is told who finished it and `result` (0-1024 bytes). The answer's `done` is the
        mark. `LeaseLost` when the lease was lost first: nothing is marked (your writes may have
        been fenced off: check before calling it done)."""
        self._finishing(result, keep)
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()
        if self._release_refused():
            try:
                self._client.release(self.resources[0], holder=self.holder, token=self.token)
            except LeasekitError:
                pass  # it lapses by itself
        return self._finished()

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Wait until the lease is lost (True) or `timeout` seconds pass (False)."""
        with self._changed:
            renewal = self._require()
            for seconds in renewal.waits(timeout):
                self._changed.wait(seconds)
            return renewal.lost

    def _renew(self, renewal: Renewal) -> None:
        outcome: Outcome = None
        while True:
            with self._changed:
                step = renewal.next(outcome)
                self._changed.notify_all()
            if step is None:
                return
            outcome = self._do(step)

    def _do(self, step: Acquire | Pause | Wait | Renew | Release) -> Outcome:
        if isinstance(step, Pause):
            time.sleep(step.seconds)
            return None
        if isinstance(step, Wait):
            return self._stop.wait(step.seconds)
        if isinstance(step, Acquire):
            try:
                return self._client._call(self._request(step), None)
            except InvalidInput as e:
                if step.wait == 0:
                    raise
                return e
        try:
            outcome: Outcome = self._client._call(self._request(step), self._deadline(step))
        except LeasekitError as e:
            outcome = e
        if isinstance(step, Release):
            self._ended = outcome
        return outcome


class HeldSession(SessionHold[Client], HeldLease):
    """A session held while a `with` block runs: opened on entry, kept alive by a background
    thread on the held lease's deadline rule, closed on exit (every permit in it ends then,
    its waiters served).

    `acquire(resource)` and `acquire_all(resources)` take holds in it: each lives exactly as
    long as the session, so there is one `lost`, `check()` and `wait_lost()` for all of them (an
    acquire that finds the session ended raises `LeaseLost` and is that loss at once). `id` is
    the session's, `tokens` each live hold's token.
    """

    def __init__(self, client: Client, *, holder: str, ttl: int) -> None:
        HeldLease.__init__(self, client, (), holder=holder, ttl=ttl, wait=0.0, limit=1)

    def __enter__(self) -> HeldSession:
        HeldLease.__enter__(self)
        return self

    def acquire(self, resource: str, *, limit: int = 1, wait: float = 0.0) -> int:
        """Hold `resource` (one of `limit` permits) in the session: its fencing token. Waits up
        to `wait` seconds in its queue (first come, first served) when someone else holds it,
        then raises `NotAcquired`."""
        return self._acquire((resource,), limit, wait)[resource]

    def acquire_all(self, resources: Sequence[str]) -> dict[str, int]:
        """Hold every one of `resources` (2-50) in the session, or none: each one's token."""
        return self._acquire(tuple(resources), 1, 0.0)

    def release(self, resource: str) -> Lease:
        """Give back one hold before the session ends (the others stay)."""
        answer = self._client.release(resource, holder=self.holder, token=self.tokens[resource])
        return self._released(resource, answer)

    def _acquire(self, resources: tuple[str, ...], limit: int, wait: float) -> dict[str, int]:
        give_up = time.monotonic() + wait
        while True:
            request = self._acquire_request(resources, limit, give_up)
            answer = self._client._call(request, None)
            tokens = self._acquired(resources, request, answer, give_up)
            if isinstance(tokens, dict):
                return tokens
            time.sleep(tokens)

