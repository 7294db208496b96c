"""The decisions of a call and of a held lease, without I/O: the state machines that the blocking
client (`_client`) and the asyncio one (`_aio`) drive.

A machine's `next(outcome)` takes the outcome of the step it asked for last and answers what to
do now: a step (send this request, pay this 402, sleep, renew, ...), or the result, or it raises
the error that ends the call. The clients do the I/O a step names and nothing else, so the two
cannot drift apart: every rule is here once. Time is read from `now` (`time.monotonic`, or a
test's clock); nothing here sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

import httpx

from ._errors import (Finished, InvalidInput, LeasekitError, LeaseLost, NotAcquired, PaymentInProgress, RateLimited,
                      ServiceError, StoreUnavailable, Unavailable, from_answer)
from ._model import Clock, Lease, body, lease_from, new_request_id, set_leases
from ._x402 import PAYMENT_REQUIRED, PAYMENT_SIGNATURE

PATH = "/api/v1/lease"
#: While the first call with a payment is still open (409 PAYMENT_IN_PROGRESS), wait for it
#: rather than pay again: at worst until the service's sweeper closes it, within a minute of a
#: crash. So many more attempts, a second apart, on top of `retries`.
IN_PROGRESS_TRIES = 75
IN_PROGRESS_PAUSE = 1.0
#: The longest a 429's Retry-After is waited out; a longer one is the call's error at once (the
#: caller knows better than to block for it: it used to sleep as long as asked, an hour or more).
MAX_RETRY_AFTER = 30.0
#: The longest wait one call asks the service for (its `waitSeconds` bound).
MAX_SERVER_WAIT = 20

#: Pause between a held lease's tries to acquire while it may wait.
ACQUIRE_PAUSE = 0.2
#: Pause before trying a renewal again after a call that failed (its own retries spent).
RETRY_PAUSE = 0.2
#: How long the release sent after a loss may take (see `Renewal.ending_after_loss`).
ENDING_GRACE = 2.0


@dataclass(frozen=True)
class Send:
    """POST `body` to `PATH` with these extra headers, the attempt given `timeout` seconds.
    Outcome: the `httpx.Response`, or `unanswered(error)` when none came."""

    body: dict[str, Any]
    timeout: float
    headers: dict[str, str]


@dataclass(frozen=True)
class Pay:
    """Pay the 402 whose PAYMENT-REQUIRED header is `offer` (see `_x402`). Outcome: the payment."""

    offer: str | None


@dataclass(frozen=True)
class Pause:
    """Sleep `seconds`. Outcome: None."""

    seconds: float


@dataclass(frozen=True)
class Acquire:
    """Acquire the held lease's resource with this request id. Outcome: the `Lease` answered, or
    the `InvalidInput` of a try that waited (a service without waitSeconds refuses the field:
    the acquisition falls back to trying again); any other error ends the acquire: let it
    propagate."""

    request_id: str
    #: Seconds the service may wait for it in the resource's queue (0: answer at once).
    wait: int = 0


@dataclass(frozen=True)
class Wait:
    """Wait `seconds`, or less if the lease is being stopped (its block ended). Outcome: whether
    it is being stopped."""

    seconds: float


@dataclass(frozen=True)
class Renew:
    """Renew the held lease, the call bounded by `deadline`. Outcome: the `Lease` answered, or
    the `LeasekitError` raised."""

    deadline: float


@dataclass(frozen=True)
class Release:
    """Release the held lease, the call bounded by `deadline`. Outcome: its answer or error (it
    lapses by itself if the release fails); no step follows."""

    deadline: float


#: What a held lease's step came to (see each step).
Outcome: TypeAlias = Lease | LeasekitError | bool | None


def unanswered(error: httpx.HTTPError) -> Unavailable:
    """The outcome of a `Send` (or `Pay`) that got no answer."""
    return Unavailable(f"the service did not answer: {error}")


def retryable(error: LeasekitError) -> bool:
    """Whether the same call may be sent again: no answer, a store failure, a 5xx, a 429."""
    return isinstance(error, (Unavailable, StoreUnavailable, RateLimited, PaymentInProgress)) or (
        isinstance(error, ServiceError) and error.status >= 500
    )


def backoff(failures: int, error: LeasekitError) -> float:
    """The pause after the `failures + 1`-th failure: what a 429 asks, a second while a payment
    is in progress, else doubling from 0.1 s up to 2 s."""
    if isinstance(error, RateLimited):
        return float(error.retry_after)
    if isinstance(error, PaymentInProgress):
        return IN_PROGRESS_PAUSE
    return float(min(0.1 * 2**failures, 2.0))


def answer_of(response: httpx.Response) -> Lease:
    """The lease a 200 answers; raises the typed error of any other answer."""
    try:
        parsed: object = response.json()
    except ValueError:
        parsed = None
    if response.status_code == 200:
        return lease_from(parsed)
    raise from_answer(response.status_code, parsed, response.headers.get("retry-after"))


class Settings:
    """What both clients keep: the service's URL, the tenant, a call's timeout and retries, and
    how a call is paid for, with an API key (`_headers`) or by `account` (exactly one is given)."""

    def __init__(self, url: str, *, api_key: str | None, account: Any, tenant: str, timeout: float,
                 retries: int) -> None:
        if (api_key is None) == (account is None):
            raise ValueError("give exactly one of api_key and account")
        self._url = url.rstrip("/")
        self.tenant = tenant
        self.retries = retries
        self.timeout = timeout
        self._headers = {"x-api-key": api_key} if api_key is not None else {}
        self._paying = account is not None

    def _new_call(self, request: dict[str, Any], deadline: float | None) -> Call:
        # A call that waits on the service is given its wait on top of the usual timeout.
        timeout = self.timeout + float(request.get("waitSeconds") or 0)
        return Call(request, timeout=timeout, retries=self.retries, paying=self._paying, deadline=deadline)


class Call:
    """One call to the service: each attempt's timeout, paying a 402, retrying, giving up.

    Every attempt sends the same `body` (a mutation's request id included), so a retry whose
    first answer was lost gets the stored answer. A payment is made once and resent unchanged on
    the retries; a new one only when the service answers 402 again (the last bought nothing), at
    most `retries + 1` in all. A failure is retried `retries` times if `retryable` (a payment in
    progress `IN_PROGRESS_TRIES` more), after `backoff` (a 429 asking more than `MAX_RETRY_AFTER`
    is not retried); `deadline` (a `now()` instant) bounds
    the call and its retries.

    `next(outcome)`: None to start and after a `Pause`; then a `Send`'s response or error, a
    `Pay`'s payment. It answers the next step or the `Lease`, or raises the call's error.
    """

    def __init__(self, body: dict[str, Any], *, timeout: float, retries: int, paying: bool,
                 deadline: float | None, now: Callable[[], float] = time.monotonic) -> None:
        self.body, self.timeout, self.retries, self.paying, self.deadline = body, timeout, retries, paying, deadline
        self._now = now
        self.failures = 0
        self.payments = 0
        self.payment: str | None = None

    def next(self, outcome: httpx.Response | str | LeasekitError | None = None) -> Send | Pay | Pause | Lease:
        if isinstance(outcome, httpx.Response):
            if outcome.status_code == 402 and self.paying and self.payments <= self.retries:
                return Pay(outcome.headers.get(PAYMENT_REQUIRED))
            try:
                return answer_of(outcome)
            except LeasekitError as error:
                outcome = error
        if isinstance(outcome, LeasekitError):
            return self._retry(outcome)
        if isinstance(outcome, str):
            self.payment, self.payments = outcome, self.payments + 1
        return Send(self.body, self._attempt_timeout(), {PAYMENT_SIGNATURE: self.payment} if self.payment else {})

    def _attempt_timeout(self) -> float:
        """`timeout`, cut to what is left before the deadline."""
        if self.deadline is None:
            return self.timeout
        left = self.deadline - self._now()
        if left <= 0:
            raise Unavailable("no answer before the deadline")
        return min(self.timeout, left)

    def _retry(self, error: LeasekitError) -> Pause:
        """The pause before sending again after `error`; raises it when there is no next try."""
        pause = backoff(self.failures, error)
        allowed = self.retries + IN_PROGRESS_TRIES if isinstance(error, PaymentInProgress) else self.retries
        if not retryable(error) or self.failures >= allowed or pause > MAX_RETRY_AFTER or (
                self.deadline is not None and self._now() + pause >= self.deadline):
            raise error
        self.failures += 1
        return Pause(pause)


class Acquisition:
    """A held lease's acquire: until `wait` seconds have passed, then `NotAcquired`. One
    resource waits in the service's queue (`waitSeconds`, at most `MAX_SERVER_WAIT` a try, the
    place kept between tries: first come, first served); a set, which cannot wait there, is tried
    again `ACQUIRE_PAUSE` apart. Each try has a new request id (a call's own retries keep
    theirs). The lease's clock starts at the granted try's send; a grant that came after a wait
    on the service is taken once more at once (the holder's own acquire, the same token), so that
    the clock starts at a send after the grant, however long the wait took.

    `next(outcome)`: None to start and after a `Pause`; an `Acquire`'s `Lease`. It answers the
    next step, or the `Renewal` of the lease once granted, or raises `NotAcquired`.
    """

    def __init__(self, resource: str, ttl: int, wait: float, now: Callable[[], float] = time.monotonic,
                 *, server_waits: bool = True) -> None:
        self.resource, self.ttl, self._now = resource, ttl, now
        self.give_up = now() + wait
        self._server_waits = server_waits
        self._asked = 0
        self._sent = 0.0
        #: The granted acquire's answer (a set's tokens are in its `leases`).
        self.answer: Lease | None = None

    def _try(self, wait: int) -> Acquire:
        self._sent, self._asked = self._now(), wait
        return Acquire(new_request_id(), wait)

    def _server_wait(self) -> int:
        """Whole seconds the next try may wait on the service."""
        left = self.give_up - self._now()
        return int(min(MAX_SERVER_WAIT, left)) if self._server_waits and left >= 1 else 0

    def next(self, outcome: Outcome = None) -> Acquire | Pause | Renewal:
        if isinstance(outcome, InvalidInput):
            # A service from before waitSeconds: it refuses the field. Try again at intervals.
            if self._asked > 0 and self._server_waits and "waitSeconds" in str(outcome):
                self._server_waits = False
                return self._try(0)
            raise outcome
        if not isinstance(outcome, Lease):
            return self._try(self._server_wait())
        # A session's open is granted with the session, which is what its renewal keeps.
        if outcome.granted and (outcome.token is not None or outcome.leases or outcome.session is not None):
            if self._asked > 0:
                return self._try(0)
            self.answer = outcome
            clock = Clock(self.ttl)
            clock.granted(self._sent)
            return Renewal(outcome.token or 0, clock, self._now)
        # Finished (every refusal is DONE: the resource, a set's blocking member, each
        # candidate): nobody is granted it while the mark stands, waiting would not help.
        if outcome.rules and all(rule == "DONE" for rule in outcome.rules):
            marks = [m.done for m in outcome.leases or () if m.done is not None]
            done = outcome.done or (marks[0] if marks else None)
            raise Finished(f"{self.resource} is finished" + (f" by {done.holder}" if done else ""), done=done)
        # Waiting would not help: the live permits were granted under another limit.
        if "LIMIT_MISMATCH" in outcome.rules:
            raise NotAcquired(f"{self.resource} is held under limit {outcome.limit}", holder=outcome.holder)
        now = self._now()
        if now >= self.give_up:
            raise NotAcquired(f"{self.resource} is held by {outcome.holder}", holder=outcome.holder)
        # The service waited and kept the place: ask again at once, while it can wait longer.
        if outcome.queue_position is not None and (wait := self._server_wait()) > 0:
            return self._try(wait)
        return Pause(min(ACQUIRE_PAUSE, self.give_up - now))


class Renewal:
    """A held lease from its grant on: when to renew (`Clock.next_renewal`), what a renewal's
    answer means, when to release, and whether the lease is lost.

    A granted renewal moves the deadline (unless a loss was judged meanwhile: that is final); a
    refused one is a loss with its rule; a failed one is tried again `RETRY_PAUSE` later while
    time is left. Stopping releases the lease, unless it is lost already. The clock changes only
    here (a read judges the loss too): a client that reads on another thread than it steps takes
    one lock around both.

    `next(outcome)`: None to start; then a `Wait`'s or `Renew`'s outcome. It answers the next
    step, or None when there is none (the lease is lost or released).
    """

    def __init__(self, token: int, clock: Clock, now: Callable[[], float] = time.monotonic) -> None:
        self.token, self.clock, self._now = token, clock, now
        self._asked: Wait | Renew | Release | None = None
        self._over = False
        self._sent = 0.0

    def next(self, outcome: Outcome = None) -> Wait | Renew | Release | None:
        asked = self._asked
        if self._over or isinstance(asked, Release):
            step: Wait | Renew | Release | None = None
        elif asked is None:
            step = self._wait_to_renew()
        elif isinstance(asked, Wait):
            step = self._release() if outcome is True else self._renew()
        elif isinstance(outcome, Lease):  # a Renew's answer
            step = self._renewed(outcome)
        else:  # a Renew's error: its own retries are spent, but time may be left
            step = Wait(RETRY_PAUSE)
        self._asked, self._over = step, step is None
        return step

    def _wait_to_renew(self) -> Wait:
        return Wait(max(0.0, self.clock.next_renewal() - self._now()))

    def _renew(self) -> Renew | None:
        sent = self._now()
        if self.clock.judge(sent):
            return None
        self._sent = sent
        return Renew(self.clock.deadline)

    def _renewed(self, answer: Lease) -> Wait | None:
        if not answer.granted:
            self.clock.refused(answer.rules[0] if answer.rules else "refused")
            return None
        # A grant that lands at or past the deadline comes too late: the lease may have been
        # someone else's meanwhile, so the loss stands, as in the Rust guard (it used to count
        # as renewed when nobody had read `lost` in between).
        if self.clock.judge(self._now()):
            return None
        self.clock.granted(self._sent)
        return self._wait_to_renew()

    def _release(self) -> Release | None:
        # A lost lease may be someone else's by now; past its deadline a release has no time left.
        if self.clock.judge(self._now()):
            return None
        return Release(self.clock.deadline)

    @property
    def lost(self) -> bool:
        return self.clock.judge(self._now())

    def ending_after_loss(self) -> Release | None:
        """When the block is left after a loss the service did not refuse, the release to send
        all the same (once, given `ENDING_GRACE`): a renewal whose answer never came may have
        been applied and kept the lease (a session, every hold in it) for another TTL (the
        attack of 2026-12-05). Releasing what is no longer ours is refused, and changes
        nothing. None after a release, a refusal, or while it is held."""
        if isinstance(self._asked, Release) or self.clock.lost_rule is not None or not self.lost:
            return None
        self._asked = Release(self._now() + ENDING_GRACE)
        return self._asked

    def check(self) -> None:
        """Raise `LeaseLost` if the lease is lost."""
        if self.lost:
            raise LeaseLost(self.clock.lost_reason or "lost", rule=self.clock.lost_rule)

    def waits(self, timeout: float | None) -> Iterator[float]:
        """The waits of `wait_lost(timeout)`: each until the deadline or the timeout, whichever is
        first, or until the machine changes (a client wakes early then); over when the lease is
        lost or the timeout has passed. `lost` says which."""
        end = None if timeout is None else self._now() + timeout
        while not self.lost:
            now = self._now()
            if end is not None and now >= end:
                return
            yield max(0.0, (self.clock.deadline if end is None else min(end, self.clock.deadline)) - now)


C = TypeVar("C", bound=Settings)


class Hold(Generic[C]):
    """What both held leases keep: their client (`C`), the lease asked for (one resource, or a
    set of them), its tokens and, once granted, its `Renewal`; the requests its steps send; and
    the reads of it, each under `guard` (a blocking holder's lock, as its renewing thread steps
    the renewal; nothing for asyncio's single thread). A set is one lease to the machines: one
    acquire, one renewal, one release, one loss."""

    #: Where the lease is held, for the error of a read anywhere else.
    _block = "`with` block"

    def __init__(self, client: C, resources: tuple[str, ...], *, holder: str, ttl: int, wait: float, limit: int,
                 guard: AbstractContextManager[Any], value: str | None = None, candidates: bool = False) -> None:
        self._client, self.holder, self.ttl, self._wait, self.limit = client, holder, ttl, wait, limit
        #: The permit's note, sent with the acquire (a candidate's address, for a campaign).
        self.value = value
        self.resources = resources
        self.resource = ", ".join(resources)
        #: Each resource's fencing token, once granted; `token` is the first's.
        self.tokens: dict[str, int] = {}
        self.token = 0
        self._renewal: Renewal | None = None
        self._guard = guard
        #: `resources` are candidates: the first that can be granted now is held (`claim_next`).
        self._candidates = candidates
        #: A finish's fields, sent with the release (docs/adr/0012); and what the release answered.
        self._finish: dict[str, Any] | None = None
        self._ended: Outcome = None

    @property
    def _is_set(self) -> bool:
        return len(self.resources) > 1 and not self._candidates

    def _acquisition(self) -> Acquisition:
        waits = not self._is_set and not self._candidates
        return Acquisition(self.resource, self.ttl, self._wait, server_waits=waits)

    def _held(self, acquisition: Acquisition, renewal: Renewal) -> None:
        """The acquire was granted: keep its tokens and its renewal (and, of candidates, the one
        won: the lease is on it from now on)."""
        answer = acquisition.answer
        if self._candidates and answer is not None and answer.resource is not None:
            self.resources, self.resource, self._candidates = (answer.resource,), answer.resource, False
        if answer is not None and answer.leases is not None:
            self.tokens = {m.resource: m.token for m in answer.leases if m.token is not None}
        else:
            self.tokens = {self.resources[0]: renewal.token}
        self.token, self._renewal = self.tokens[self.resources[0]], renewal

    def _request(self, step: Acquire | Renew | Release) -> dict[str, Any]:
        """The body a step sends, for one resource or the whole set."""
        tenant, fields = self._client.tenant, {"holder": self.holder}
        if isinstance(step, Acquire):
            named = self._is_set or self._candidates
            target: dict[str, Any] = {"candidates" if self._candidates else "resources": list(self.resources)} if named else {}
            return body("acquire", None if named else self.resources[0], tenant, ttl=self.ttl,
                        limit=self.limit if self.limit != 1 else None, request_id=step.request_id,
                        wait=step.wait or None, value=self.value, **target, **fields)
        op = "renew" if isinstance(step, Renew) else "release"
        ttl = self.ttl if isinstance(step, Renew) else None
        if self._is_set:
            leases = set_leases([(r, self.tokens[r]) for r in self.resources])
            return body(op, None, tenant, leases=leases, ttl=ttl, request_id=new_request_id(), **fields)
        finish = self._finish if isinstance(step, Release) and self._finish is not None else {}
        return body(op, self.resources[0], tenant, token=self.token, ttl=ttl, request_id=new_request_id(),
                    **finish, **fields)

    @staticmethod
    def _deadline(step: Acquire | Renew | Release) -> float | None:
        return None if isinstance(step, Acquire) else step.deadline

    @property
    def deadline(self) -> float:
        """The local deadline (`time.monotonic()`): held until then at least, unless renewed."""
        with self._guard:
            return self._require().clock.deadline

    @property
    def lost(self) -> bool:
        with self._guard:
            return self._require().lost

    def check(self) -> None:
        """Raise `LeaseLost` if the lease is lost."""
        with self._guard:
            self._require().check()

    def _require(self) -> Renewal:
        if self._renewal is None:
            raise RuntimeError(f"the lease is held only inside its {self._block}")
        return self._renewal

    def _proclaimed(self, value: str, answer: Lease) -> Lease:
        """A proclaim's answer: the lease's value from now on; or, refused (the token is no
        longer a live permit's: someone else leads, or nobody), the lease is lost from now on,
        every read of it says so at once (it waited for the next renewal: the attack of
        2026-12-06), and `LeaseLost`."""
        if answer.granted:
            self.value = value
            return answer
        rule = answer.rules[0] if answer.rules else "refused"
        with self._guard:
            self._require().clock.refused(rule)
            self._lost_now()
        raise LeaseLost(f"proclaim refused ({rule}): no longer the leader", rule=rule)

    def _lost_now(self) -> None:
        """Wake whoever waits for the loss (under `_guard`)."""

    def _finishing(self, result: str | None, keep: int | None) -> None:
        """The release that ends the hold is a done release from now on (docs/adr/0012)."""
        if self._is_set:
            raise ValueError("a set is not finished whole: finish each of its resources in a hold of its own")
        with self._guard:
            self._require().check()
        if result is not None and len(result.encode()) > MAX_RESULT_BYTES:
            raise ValueError(f"a result is at most {MAX_RESULT_BYTES} bytes of UTF-8")
        self._finish = {"done": True, "result": result, "keep_done": keep}

    def _release_refused(self) -> bool:
        """Whether the done release was refused with nothing changed (bad input, or a rule: the
        resource finished by another holder meanwhile): the permit is then released plainly, not
        left held for its whole TTL (the attack of 2026-12-06)."""
        answer = self._ended
        return isinstance(answer, InvalidInput) or (isinstance(answer, Lease) and not answer.granted)

    def _finished(self) -> Lease:
        """A finish's answer: the resource's mark in `done`. `LeaseLost` when the lease was lost
        before the release could be sent, or the release was refused (nothing was marked)."""
        answer = self._ended
        if isinstance(answer, LeasekitError):
            raise answer
        if isinstance(answer, Lease) and answer.granted:
            return answer
        with self._guard:
            clock = self._require().clock
            if isinstance(answer, Lease):
                clock.refused(answer.rules[0] if answer.rules else "refused")
            clock.judge(float("inf"))
            self._lost_now()
        raise LeaseLost(f"not finished: {clock.lost_reason}", rule=clock.lost_rule)


#: The longest result a done release keeps, in UTF-8 bytes.
MAX_RESULT_BYTES = 1024

#: The rules by which an acquire in a session learns that the session has ended, and with it
#: every hold in it.
SESSION_ENDED = ("SESSION_EXPIRED", "NOT_HOLDER")


class SessionHold(Hold[C]):
    """What both held sessions keep, on top of a held lease's machines: the session is the one
    thing acquired (`open`), renewed (`keepalive`) and released (`close`), so the session's
    clock is every hold's in it. Acquires in the session are calls beside that: their requests
    and what their answers mean are here; `tokens` keeps each live hold's token."""

    #: The session's id, once open.
    id = ""

    def _acquisition(self) -> Acquisition:
        return Acquisition(f"session of {self.holder}", self.ttl, 0.0, server_waits=False)

    def _held(self, acquisition: Acquisition, renewal: Renewal) -> None:
        answer = acquisition.answer
        assert answer is not None and answer.session is not None, "an open is granted with its session"
        self.id, self._renewal = answer.session.id, renewal

    def _request(self, step: Acquire | Renew | Release) -> dict[str, Any]:
        tenant = self._client.tenant
        if isinstance(step, Acquire):
            return body("open", None, tenant, holder=self.holder, ttl=self.ttl, request_id=step.request_id)
        op = "keepalive" if isinstance(step, Renew) else "close"
        return body(op, None, tenant, session=self.id, holder=self.holder, request_id=new_request_id())

    def _acquire_request(self, resources: Sequence[str], limit: int, give_up: float) -> dict[str, Any]:
        """An acquire in the session (one resource may wait until `give_up`, a `now()` instant);
        raises `LeaseLost` once the session is lost, sending nothing (a grant would be worth
        nothing)."""
        with self._guard:
            self._require().check()
        left = give_up - time.monotonic()
        wait = int(min(MAX_SERVER_WAIT, left)) if len(resources) == 1 and left >= 1 else None
        target: dict[str, Any] = {"resources": list(resources)} if len(resources) > 1 else {}
        return body("acquire", resources[0] if len(resources) == 1 else None, self._client.tenant,
                    holder=self.holder, session=self.id, limit=limit if limit != 1 else None, wait=wait,
                    request_id=new_request_id(), **target)

    def _acquired(self, resources: Sequence[str], request: dict[str, Any], answer: Lease,
                  give_up: float) -> dict[str, int] | float:
        """Each resource's token once the acquire (`request`) is granted; else, while time is
        left, the seconds to pause before asking again (none after a wait on the service, which
        kept the place; `ACQUIRE_PAUSE` after a try that could not wait). Raises `LeaseLost` when the session has ended (and records
        it: the session's one loss, for every hold), `InvalidInput` for a full session or
        another limit, `NotAcquired` when someone else holds it."""
        if answer.granted:
            tokens = ({m.resource: m.token for m in answer.leases if m.token is not None}
                      if answer.leases is not None else {resources[0]: answer.token or 0})
            with self._guard:
                self._require().check()
                self.tokens.update(tokens)
            return tokens
        rule = answer.rules[0] if answer.rules else "refused"
        if rule in SESSION_ENDED:
            with self._guard:
                renewal = self._require()
                renewal.clock.refused(rule)
                self._lost_now()
                renewal.check()
        if rule == "SESSION_FULL":
            raise InvalidInput(f"session {self.id} holds as many permits as a session may (256)", code=rule)
        if rule == "LIMIT_MISMATCH":
            raise InvalidInput(f"{resources[0]} is held under limit {answer.limit}", code=rule)
        left = give_up - time.monotonic()
        if left > 0:
            return 0.0 if request.get("waitSeconds") else min(ACQUIRE_PAUSE, left)
        holder = answer.holder
        if answer.leases is not None:
            holder = next((m.holder for m in answer.leases if not m.granted), None)
        raise NotAcquired(f"{', '.join(resources)} is held by {holder}", holder=holder)

    def _released(self, resource: str, answer: Lease) -> Lease:
        if answer.granted:
            with self._guard:
                self.tokens.pop(resource, None)
        return answer
