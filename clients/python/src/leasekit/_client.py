"""The blocking client, and a lease held by a background thread."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

import httpx

from ._errors import (LeasekitError, LeaseLost, NotAcquired, PaymentInProgress, RateLimited, ServiceError,
                      StoreUnavailable, Unavailable, from_answer)
from ._model import Clock, Lease, body, lease_from, new_request_id
from ._x402 import PAYMENT_REQUIRED, PAYMENT_SIGNATURE, Payer

PATH = "/api/v1/lease"
#: Pause before trying a renewal again after a call that failed (its own retries spent).
RETRY_PAUSE = 0.2


def retryable(error: LeasekitError) -> bool:
    """Whether the same call may be sent again: no answer, a store failure, a 5xx, a 429."""
    return isinstance(error, (Unavailable, StoreUnavailable, RateLimited, PaymentInProgress)) or (
        isinstance(error, ServiceError) and error.status >= 500
    )


#: While the first call with a payment is still open (409 PAYMENT_IN_PROGRESS), wait for it
#: rather than pay again: at worst until the service's sweeper closes it, within a minute of a
#: crash. So many more attempts, a second apart, on top of `retries`.
IN_PROGRESS_TRIES = 75
IN_PROGRESS_PAUSE = 1.0


def backoff(attempt: int, error: LeasekitError) -> float:
    if isinstance(error, RateLimited):
        return float(error.retry_after)
    if isinstance(error, PaymentInProgress):
        return IN_PROGRESS_PAUSE
    return float(min(0.1 * 2**attempt, 2.0))


def attempt_timeout(timeout: float, deadline: float | None) -> float:
    """The time one attempt may take: `timeout`, cut to what is left before `deadline`."""
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise Unavailable("no answer before the deadline")
    return min(timeout, left)


def pause_before_retry(attempt: int, retries: int, error: LeasekitError, deadline: float | None) -> float:
    """How long to wait before attempt `attempt + 1`; raises `error` when there is none."""
    pause = backoff(attempt, error)
    allowed = retries + IN_PROGRESS_TRIES if isinstance(error, PaymentInProgress) else retries
    if not retryable(error) or attempt >= allowed or (
            deadline is not None and time.monotonic() + pause >= deadline):
        raise error
    return pause


def credentials(api_key: str | None, account: Any) -> dict[str, str]:
    """The headers of a client with an API key; none for a paying one. Exactly one is given."""
    if (api_key is None) == (account is None):
        raise ValueError("give exactly one of api_key and account")
    return {"x-api-key": api_key} if api_key is not None else {}


def must_pay(response: httpx.Response, paying: bool, payments: int, retries: int) -> bool:
    """Whether to answer this 402 with a (new) payment: a paying client, within its retries."""
    return response.status_code == 402 and paying and payments <= retries


def payment_header(payment: str | None) -> dict[str, str]:
    return {PAYMENT_SIGNATURE: payment} if payment else {}


def answer_of(response: httpx.Response) -> Lease:
    try:
        parsed: object = response.json()
    except ValueError:
        parsed = None
    if response.status_code == 200:
        return lease_from(parsed)
    raise from_answer(response.status_code, parsed, response.headers.get("retry-after"))


class Client:
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
        self.tenant = tenant
        self.retries = retries
        self.timeout = timeout
        headers = credentials(api_key, account)
        self._payer = Payer(account) if account is not None else None
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def acquire(self, resource: str, *, holder: str, ttl: int = 30, request_id: str | None = None,
                deadline: float | None = None) -> Lease:
        """Acquire `resource` for `ttl` seconds; `granted` says whether you hold it now."""
        return self._call(body("acquire", resource, self.tenant, holder=holder, ttl=ttl,
                               request_id=request_id or new_request_id()), deadline)

    def renew(self, resource: str, *, holder: str, token: int, ttl: int = 30,
              request_id: str | None = None, deadline: float | None = None) -> Lease:
        """Extend a lease you hold to `ttl` seconds from now; refused once it has lapsed."""
        return self._call(body("renew", resource, self.tenant, holder=holder, token=token, ttl=ttl,
                               request_id=request_id or new_request_id()), deadline)

    def release(self, resource: str, *, holder: str, token: int, request_id: str | None = None,
                deadline: float | None = None) -> Lease:
        """Release a lease you hold."""
        return self._call(body("release", resource, self.tenant, holder=holder, token=token,
                               request_id=request_id or new_request_id()), deadline)

    def get(self, resource: str, *, deadline: float | None = None) -> Lease:
        """Who holds `resource` now."""
        return self._call(body("get", resource, self.tenant), deadline)

    def lease(self, resource: str, *, holder: str, ttl: int = 30, wait: float = 0.0) -> HeldLease:
        """Hold `resource` while a `with` block runs (see `HeldLease`)."""
        return HeldLease(self, resource, holder=holder, ttl=ttl, wait=wait)

    def _call(self, request: dict[str, Any], deadline: float | None) -> Lease:
        attempt, payments = 0, 0
        payment: str | None = None
        while True:
            timeout = attempt_timeout(self.timeout, deadline)
            try:
                response = self._http.post(PATH, json=request, timeout=timeout, headers=payment_header(payment))
                if must_pay(response, self._payer is not None, payments, self.retries):
                    assert self._payer is not None
                    payment, payments = self._payer.pay(response.headers.get(PAYMENT_REQUIRED)), payments + 1
                    continue
                return answer_of(response)
            except httpx.HTTPError as e:
                error: LeasekitError = Unavailable(f"the service did not answer: {e}")
            except LeasekitError as e:
                error = e
            time.sleep(pause_before_retry(attempt, self.retries, error, deadline))
            attempt += 1


class HeldLease:
    """A lease held while a `with` block runs, renewed in the background.

    On entry it acquires (trying again until `wait` seconds have passed, then raising
    `NotAcquired`); a thread renews a third of the way to the local deadline (see
    `safety_margin`); on exit it stops renewing and releases. Nothing it says counts past the
    local deadline: `lost` turns true when a renewal is refused or none got through before it,
    `check()` raises `LeaseLost` then, and `wait_lost(timeout)` waits for it. Stop the work when
    `lost` turns true: past the deadline another holder may have the resource (and a larger
    `token`, which is what fences your late writes).
    """

    def __init__(self, client: Client, resource: str, *, holder: str, ttl: int, wait: float) -> None:
        self._client, self.resource, self.holder, self.ttl, self._wait = client, resource, holder, ttl, wait
        self.token = 0
        self._clock: Clock | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> HeldLease:
        give_up = time.monotonic() + self._wait
        request_id = new_request_id()
        while True:
            sent = time.monotonic()
            lease = self._client.acquire(self.resource, holder=self.holder, ttl=self.ttl,
                                         request_id=request_id)
            if lease.granted and lease.token is not None:
                break
            if time.monotonic() >= give_up:
                raise NotAcquired(f"{self.resource} is held by {lease.holder}", holder=lease.holder)
            # A refused acquire changes nothing, so the next try needs a new id.
            request_id = new_request_id()
            time.sleep(min(0.2, max(0.0, give_up - time.monotonic())))
        self.token = lease.token
        clock = Clock(ttl=self.ttl, deadline=0.0)
        clock.deadline = sent + clock.usable
        self._clock = clock
        self._thread = threading.Thread(target=self._renew, name=f"leasekit-renew-{self.resource}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join()

    @property
    def deadline(self) -> float:
        """The local deadline (`time.monotonic()`): held until then at least, unless renewed."""
        with self._changed:
            return self._require().deadline

    @property
    def lost(self) -> bool:
        with self._changed:
            return self._require().judge(time.monotonic())

    def check(self) -> None:
        """Raise `LeaseLost` if the lease is lost."""
        with self._changed:
            clock = self._require()
            if clock.judge(time.monotonic()):
                raise LeaseLost(clock.lost_reason or "lost", rule=clock.lost_rule)

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Wait until the lease is lost (True) or `timeout` seconds pass (False)."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            clock = self._require()
            while not clock.judge(time.monotonic()):
                now = time.monotonic()
                if end is not None and now >= end:
                    return False
                until = clock.deadline if end is None else min(end, clock.deadline)
                self._changed.wait(max(0.0, until - now))
            return True

    def _require(self) -> Clock:
        if self._clock is None:
            raise RuntimeError("the lease is held only inside its `with` block")
        return self._clock

    def _renew(self) -> None:
        clock = self._require()
        while True:
            with self._changed:
                at, deadline = clock.next_renewal(), clock.deadline
            if self._stop.wait(max(0.0, at - time.monotonic())):
                return self._release(deadline)
            while True:
                sent = time.monotonic()
                with self._changed:
                    if clock.judge(sent):
                        self._changed.notify_all()
                        return
                try:
                    lease = self._client.renew(self.resource, holder=self.holder, token=self.token,
                                               ttl=self.ttl, deadline=deadline)
                except LeasekitError:
                    if self._stop.wait(RETRY_PAUSE):
                        return self._release(deadline)
                    continue
                with self._changed:
                    if lease.granted:
                        clock.granted(sent)
                    else:
                        clock.refused(lease.rules[0] if lease.rules else "refused")
                    self._changed.notify_all()
                    if not lease.granted:
                        return
                break
            if self._stop.is_set():
                return self._release(clock.deadline)

    def _release(self, deadline: float) -> None:
        with self._changed:
            if self._require().judge(time.monotonic()):
                return
        try:
            self._client.release(self.resource, holder=self.holder, token=self.token, deadline=deadline)
        except LeasekitError:
            pass  # it lapses by itself at its expiry
