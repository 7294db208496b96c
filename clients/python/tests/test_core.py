"""The decisions of `_core`, without a server: each machine stepped by hand on a test clock, every
rule on both sides of its boundary."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

import httpx
import pytest

import leasekit
from leasekit._core import (ACQUIRE_PAUSE, IN_PROGRESS_PAUSE, IN_PROGRESS_TRIES, RETRY_PAUSE, Acquire, Acquisition,
                            Call, Pause, Pay, Release, Renew, Renewal, Send, Settings, Wait)
from leasekit._model import Clock, Lease

DEADLINES = os.path.join(os.path.dirname(__file__), "..", "..", "deadlines.json")
BODY = {"op": "acquire", "resource": "r", "requestId": "py-1"}


class Now:
    """A clock the test moves by hand."""

    def __init__(self, at: float = 100.0) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def answer(status: int, data: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json={"data": data} if data is not None else {"error": "no", "code": "X"},
                          headers=headers)


def seconds(step: object, kind: type[Pause] | type[Wait]) -> float:
    """How long a `Pause` or `Wait` is, checking it is one."""
    assert isinstance(step, kind), step
    return step.seconds


def bound(step: object, kind: type[Renew] | type[Release]) -> float:
    """The deadline that bounds a `Renew` or `Release`, checking it is one."""
    assert isinstance(step, kind), step
    return step.deadline


def granted(token: int = 1) -> httpx.Response:
    return answer(200, {"granted": True, "fencingToken": token, "holder": "a"})


def lease(granted: bool, token: int | None = 1, rules: tuple[str, ...] = ()) -> Lease:
    return Lease(granted=granted, token=token, holder="a" if granted else "other", expires_at=None, rules=rules,
                 replayed=False)


def call(now: Now, *, retries: int = 3, paying: bool = False, deadline: float | None = None,
         timeout: float = 10.0) -> Call:
    return Call(BODY, timeout=timeout, retries=retries, paying=paying, deadline=deadline, now=now)


# The deadline table shared with the Rust client (clients/deadlines.json).

def floor_ms(seconds: float) -> int:
    """`seconds` in whole ms, rounded down as the table is; the nanosecond allows for float error
    (the exact values are whole ms or thirds of one, never within a nanosecond above a whole)."""
    return math.floor(seconds * 1000 + 1e-6)


def test_the_shared_deadline_table() -> None:
    with open(DEADLINES) as f:
        table = json.load(f)
    assert isinstance(table["about"], str) and table["about"]
    ttls = {case["ttlSeconds"] for case in table["cases"]}
    assert ttls == {1, 2, 3, 10, 30, 60, 300, 3600}
    for case in table["cases"]:
        clock = Clock(case["ttlSeconds"])
        clock.granted(case["sentMs"] / 1000)
        ms = (floor_ms(clock.deadline), floor_ms(clock.next_renewal()))
        assert ms == (case["deadlineMs"], case["renewAtMs"]), case


def test_the_safety_margin_is_a_hundredth_and_a_quarter_second() -> None:
    assert leasekit.safety_margin(30) == pytest.approx(0.55)
    assert leasekit.safety_margin(1) == pytest.approx(0.26)


# One call: sending, retrying, paying.

def test_a_call_sends_its_body_and_returns_the_lease() -> None:
    c = call(Now())
    send = c.next()
    assert send == Send(BODY, 10.0, {})
    result = c.next(granted(7))
    assert isinstance(result, Lease) and result.granted and result.token == 7


def test_without_a_deadline_an_attempt_has_the_whole_timeout() -> None:
    assert call(Now(), deadline=None, timeout=4.0).next() == Send(BODY, 4.0, {})


def test_an_attempt_is_cut_to_what_is_left_before_the_deadline() -> None:
    now = Now(100.0)
    assert call(now, deadline=150.0, timeout=10.0).next() == Send(BODY, 10.0, {})
    assert call(now, deadline=102.5, timeout=10.0).next() == Send(BODY, 2.5, {})


def test_no_attempt_at_or_past_the_deadline() -> None:
    now = Now(100.0)
    with pytest.raises(leasekit.Unavailable, match="deadline"):
        call(now, deadline=100.0).next()
    with pytest.raises(leasekit.Unavailable, match="deadline"):
        call(now, deadline=99.0).next()


@pytest.mark.parametrize("error", [
    leasekit.Unavailable("no answer"),
    leasekit.StoreUnavailable("store", status=502),
    leasekit.ServiceError("boom", status=500),
    leasekit.ServiceError("busy", status=503),
    leasekit.RateLimited("slow down", retry_after=1.0),
    leasekit.PaymentInProgress("open", status=409),
])
def test_retryable_errors_are_sent_again_with_the_same_body(error: leasekit.LeasekitError) -> None:
    c = call(Now())
    c.next()
    assert isinstance(c.next(error), Pause)
    assert c.next() == Send(BODY, 10.0, {}), "the same request, request id included"


@pytest.mark.parametrize("error", [
    leasekit.InvalidInput("bad", status=400),
    leasekit.Unauthorized("who", status=401),
    leasekit.PaymentRequired("pay", status=402),
    leasekit.Forbidden("no", status=403),
    leasekit.IdempotencyConflict("again", status=409),
    leasekit.PaymentIdentifierConflict("twice", status=409),
    leasekit.PayloadTooLarge("big", status=413),
    leasekit.ServiceError("odd", status=499),
    leasekit.ServiceError("not a lease answer", status=200),
])
def test_other_errors_end_the_call_at_once(error: leasekit.LeasekitError) -> None:
    c = call(Now())
    c.next()
    with pytest.raises(type(error)) as raised:
        c.next(error)
    assert raised.value is error


def test_answers_are_read_into_typed_errors() -> None:
    c = call(Now())
    c.next()
    with pytest.raises(leasekit.IdempotencyConflict):
        c.next(answer(409))
    c = call(Now())
    c.next()
    with pytest.raises(leasekit.ServiceError) as unreadable:
        c.next(answer(200, {"no": "lease"}))
    assert unreadable.value.status == 200


def test_retries_back_off_doubling_up_to_two_seconds() -> None:
    c = call(Now(), retries=10)
    c.next()
    pauses = []
    for _ in range(7):
        pause = c.next(leasekit.Unavailable("no answer"))
        assert isinstance(pause, Pause)
        pauses.append(pause.seconds)
        c.next()
    assert pauses == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0])


def test_a_429_waits_what_retry_after_says() -> None:
    for header, pause in (("3", 3.0), ("0.5", 0.5), ("soon", 1.0), ("-5", 1.0), ("nan", 1.0), ("inf", 1.0),
                          ("Wed, 21 Oct 2026 07:28:00 GMT", 1.0), ("30", 30.0)):
        c = call(Now())
        c.next()
        assert c.next(answer(429, headers={"retry-after": header})) == Pause(pause)
    c = call(Now())
    c.next()
    assert c.next(answer(429)) == Pause(1.0), "no Retry-After: a second"


def test_a_429_asking_more_than_the_longest_wait_is_the_calls_error() -> None:
    for header in ("30.5", "3600", "1e9"):
        c = call(Now())
        c.next()
        with pytest.raises(leasekit.RateLimited) as raised:
            c.next(answer(429, headers={"retry-after": header}))
        assert raised.value.retry_after == float(header)


def test_an_offer_no_scheme_can_pay_is_the_services_error() -> None:
    from eth_account import Account
    from x402.http.utils import encode_payment_required_header
    from x402.schemas import PaymentRequired, ResourceInfo
    from leasekit._x402 import Payer
    offer = PaymentRequired(x402_version=2, accepts=[], resource=ResourceInfo(url="http://h/api/v1/lease"))
    with pytest.raises(leasekit.ServiceError) as raised:
        Payer(Account.create()).pay(encode_payment_required_header(offer))
    assert raised.value.status == 402 and "cannot be paid" in raised.value.message


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_a_call_is_sent_retries_plus_one_times(retries: int) -> None:
    c = call(Now(), retries=retries)
    sends = 0
    with pytest.raises(leasekit.Unavailable):
        step = c.next()
        while True:
            assert isinstance(step, Send)
            sends += 1
            assert isinstance(c.next(leasekit.Unavailable("no answer")), Pause)
            step = c.next()
    assert sends == retries + 1 and c.failures == retries


def test_no_retry_whose_pause_would_reach_the_deadline() -> None:
    slow_down = answer(429, headers={"retry-after": "0.5"})
    c = call(Now(100.0), deadline=100.75)
    c.next()
    assert c.next(slow_down) == Pause(0.5), "100.5 < 100.75"
    c = call(Now(100.0), deadline=100.5)
    c.next()
    with pytest.raises(leasekit.RateLimited):
        c.next(slow_down)  # 100.5 >= 100.5: the call's error, not a deadline error


def test_a_payment_in_progress_is_waited_on_a_second_apart_beyond_the_retries() -> None:
    c = call(Now(), retries=1)
    c.next()
    in_progress = leasekit.PaymentInProgress("open", status=409, code="PAYMENT_IN_PROGRESS")
    for _ in range(1 + IN_PROGRESS_TRIES):
        assert c.next(in_progress) == Pause(IN_PROGRESS_PAUSE)
        c.next()
    with pytest.raises(leasekit.PaymentInProgress):
        c.next(in_progress)
    assert c.failures == 1 + IN_PROGRESS_TRIES == 76


def test_the_in_progress_allowance_counts_the_failures_before_it() -> None:
    c = call(Now(), retries=1)
    c.next()
    assert isinstance(c.next(leasekit.Unavailable("no answer")), Pause)
    c.next()
    for _ in range(IN_PROGRESS_TRIES):
        assert isinstance(c.next(leasekit.PaymentInProgress("open")), Pause)
        c.next()
    with pytest.raises(leasekit.PaymentInProgress):
        c.next(leasekit.PaymentInProgress("open"))


def test_a_402_is_an_error_for_a_client_with_an_api_key() -> None:
    c = call(Now(), paying=False)
    c.next()
    with pytest.raises(leasekit.PaymentRequired):
        c.next(answer(402, headers={"payment-required": "offer"}))


def test_a_paying_call_pays_once_and_resends_the_payment_on_its_retries() -> None:
    c = call(Now(), paying=True)
    assert c.next() == Send(BODY, 10.0, {})
    assert c.next(answer(402, headers={"payment-required": "offer-1"})) == Pay("offer-1")
    assert c.next("payment-1") == Send(BODY, 10.0, {"payment-signature": "payment-1"})
    assert isinstance(c.next(leasekit.Unavailable("the paid answer was lost")), Pause)
    assert c.next() == Send(BODY, 10.0, {"payment-signature": "payment-1"}), "the same payment, resent"
    assert isinstance(c.next(granted()), Lease)
    assert (c.payments, c.failures) == (1, 1), "a paid resend is not a failure"


def test_a_402_after_a_payment_is_paid_anew_within_the_retries_and_not_over() -> None:
    c = call(Now(), paying=True, retries=2)
    c.next()
    for n in range(3):  # payments 0, 1, 2 <= retries
        assert c.next(answer(402, headers={"payment-required": f"offer-{n}"})) == Pay(f"offer-{n}")
        assert c.next(f"payment-{n}") == Send(BODY, 10.0, {"payment-signature": f"payment-{n}"})
    with pytest.raises(leasekit.PaymentRequired):
        c.next(answer(402, headers={"payment-required": "offer-3"}))
    assert c.payments == 3


def test_settings_take_exactly_one_of_an_api_key_and_an_account() -> None:
    with pytest.raises(ValueError):
        Settings("u", api_key=None, account=None, tenant="t", timeout=1, retries=1)
    with pytest.raises(ValueError):
        Settings("u", api_key="k", account=object(), tenant="t", timeout=1, retries=1)
    keyed = Settings("http://x/", api_key="k", account=None, tenant="t", timeout=1, retries=1)
    paying = Settings("http://x", api_key=None, account=object(), tenant="t", timeout=1, retries=1)
    assert (keyed._url, keyed._headers, keyed._paying) == ("http://x", {"x-api-key": "k"}, False)
    assert (paying._headers, paying._paying) == ({}, True)


# A held lease's acquire.

def test_an_acquire_granted_starts_the_clock_at_its_send() -> None:
    now = Now(100.0)
    a = Acquisition("r", 30, wait=0.0, now=now)
    assert isinstance(a.next(), Acquire)
    now.at = 100.4  # the answer came later than the send
    renewal = a.next(lease(True, token=5))
    assert isinstance(renewal, Renewal) and renewal.token == 5
    assert renewal.clock.deadline == pytest.approx(100.0 + 29.45)


def test_a_refused_acquire_is_tried_again_with_a_new_request_id_while_it_may_wait() -> None:
    now = Now(100.0)
    # A set (or a service without a queue): asked again with a pause.
    a = Acquisition("r", 30, wait=1.0, now=now, server_waits=False)
    first = a.next()
    assert a.next(lease(False, token=None, rules=("LEASE_HELD",))) == Pause(ACQUIRE_PAUSE)
    second = a.next()
    assert isinstance(first, Acquire) and isinstance(second, Acquire)
    assert first.request_id != second.request_id, "a refused acquire changed nothing"
    now.at = 100.9
    assert seconds(a.next(lease(False)), Pause) == pytest.approx(0.1), "no pause past the end of the wait"


def test_one_resource_waits_in_the_services_queue_and_starts_its_clock_after_the_grant() -> None:
    now = Now(100.0)
    a = Acquisition("r", 30, wait=45.0, now=now)
    first = a.next()
    assert isinstance(first, Acquire) and first.wait == 20, "at most 20 s a call"
    # The call's wait ended ungranted: at once again, for what is left, from the same place.
    now.at = 120.5
    queued = dataclasses.replace(lease(False, token=None, rules=("LEASE_HELD",)), queue_position=1)
    again = a.next(queued)
    assert isinstance(again, Acquire) and again.wait == 20 and again.request_id != first.request_id
    now.at = 131.0
    # Granted after waiting: taken once more at once (the same token), and the clock counts from
    # that send, not from the wait's.
    confirm = a.next(lease(True, token=7))
    assert isinstance(confirm, Acquire) and confirm.wait == 0
    now.at = 131.2
    renewal = a.next(lease(True, token=7))
    assert isinstance(renewal, Renewal) and renewal.token == 7
    assert renewal.clock.deadline == pytest.approx(131.0 + 29.45)
    # Less than a second left: no wait on the service, a short pause instead.
    c = Acquisition("r", 30, wait=0.5, now=Now(100.0))
    assert getattr(c.next(), "wait") == 0


def test_a_service_without_waitseconds_is_asked_again_at_intervals() -> None:
    now = Now(100.0)
    a = Acquisition("r", 30, wait=10.0, now=now)
    first = a.next()
    assert isinstance(first, Acquire) and first.wait == 10
    # An older service refuses the unknown field: the same acquire, without it, then pauses.
    refused = leasekit.InvalidInput("invalid input at /waitSeconds: unknown property", status=400)
    again = a.next(refused)
    assert isinstance(again, Acquire) and again.wait == 0 and again.request_id != first.request_id
    assert a.next(lease(False, token=None, rules=("LEASE_HELD",))) == Pause(ACQUIRE_PAUSE)
    assert getattr(a.next(), "wait") == 0, "it does not ask the service to wait again"
    # Any other refusal is the caller's error.
    b = Acquisition("r", 30, wait=10.0, now=now)
    b.next()
    with pytest.raises(leasekit.InvalidInput):
        b.next(leasekit.InvalidInput("invalid input at /holder", status=400))


def test_a_refused_acquire_at_the_end_of_the_wait_is_not_acquired() -> None:
    now = Now(100.0)
    a = Acquisition("r", 30, wait=1.0, now=now)
    a.next()
    now.at = 101.0
    with pytest.raises(leasekit.NotAcquired) as failed:
        a.next(lease(False, token=None))
    assert failed.value.holder == "other"


def test_with_no_wait_the_first_refusal_is_not_acquired() -> None:
    a = Acquisition("r", 30, wait=0.0, now=Now())
    a.next()
    with pytest.raises(leasekit.NotAcquired):
        a.next(lease(False, token=None))


def test_a_grant_without_a_token_is_not_held() -> None:
    a = Acquisition("r", 30, wait=1.0, now=Now())
    a.next()
    assert isinstance(a.next(lease(True, token=None)), Pause)


# A held lease's renewals.

def held(now: Now, ttl: int = 30) -> Renewal:
    """A renewal of a lease granted now (deadline now + 29.45 for 30 s)."""
    clock = Clock(ttl)
    clock.granted(now())
    return Renewal(3, clock, now)


def test_the_first_renewal_is_a_third_of_the_way_to_the_deadline() -> None:
    now = Now(100.0)
    r = held(now)
    assert r.clock.next_renewal() == pytest.approx(100 + 29.45 / 3)
    now.at = 101.0
    assert seconds(r.next(), Wait) == pytest.approx(29.45 / 3 - 1)


def test_a_granted_renewal_moves_the_deadline_from_its_send() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    now.at = 110.0
    assert bound(r.next(False), Renew) == pytest.approx(129.45), "the call is bounded by the deadline"
    now.at = 110.5
    wait = r.next(lease(True))
    assert r.clock.deadline == pytest.approx(110.0 + 29.45), "from the send, not the answer"
    assert seconds(wait, Wait) == pytest.approx(110.0 + 29.45 / 3 - 110.5)
    assert not r.lost


def test_a_refused_renewal_is_a_loss_with_its_rule() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    r.next(False)
    assert r.next(lease(False, rules=("NO_HOLD", "OTHER"))) is None
    assert r.lost and r.clock.lost_rule == "NO_HOLD"
    with pytest.raises(leasekit.LeaseLost) as lost:
        r.check()
    assert lost.value.rule == "NO_HOLD" and "refused" in lost.value.message


def test_a_refusal_without_a_rule_is_still_a_loss() -> None:
    r = held(Now())
    r.next()
    r.next(False)
    assert r.next(lease(False)) is None and r.clock.lost_rule == "refused"


def test_a_failed_renewal_is_tried_again_after_a_pause_with_the_same_deadline() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    now.at = 110.0
    first = r.next(False)
    assert r.next(leasekit.Unavailable("no answer")) == Wait(RETRY_PAUSE)
    now.at = 110.2
    assert r.next(False) == first and bound(first, Renew) == pytest.approx(129.45)


def test_no_renewal_is_sent_at_or_past_the_deadline() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    r.next(False)
    r.next(leasekit.Unavailable("no answer"))
    now.at = 129.45 - 1e-6
    assert isinstance(r.next(False), Renew), "just before the deadline"
    r.next(leasekit.Unavailable("no answer"))
    now.at = 129.45
    assert r.next(False) is None
    assert r.lost and r.clock.lost_rule is None
    with pytest.raises(leasekit.LeaseLost, match="no renewal got through"):
        r.check()


def test_a_renewal_granted_after_the_loss_was_judged_does_not_revive_it() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    now.at = 129.0
    r.next(False)  # a renewal in flight
    now.at = 129.5
    assert r.lost, "judged past the deadline while the renewal was out"
    assert r.next(lease(True)) is None
    assert r.lost and r.clock.deadline == pytest.approx(129.45)


def test_a_renewal_granted_past_the_deadline_is_too_late_even_unread() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    now.at = 129.0
    r.next(False)  # a renewal in flight; nobody reads `lost` before its grant lands
    now.at = 129.45
    assert r.next(lease(True)) is None, "landed at the deadline: lost, not renewed"
    assert r.lost and r.clock.deadline == pytest.approx(129.45)


def test_a_renewal_granted_just_before_the_deadline_counts() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    now.at = 129.0
    r.next(False)
    now.at = 129.45 - 1e-6
    assert isinstance(r.next(lease(True)), Wait)
    assert not r.lost and r.clock.deadline == pytest.approx(129.0 + 29.45)


def test_an_unreadable_offer_is_the_services_error() -> None:
    from leasekit._x402 import _offer
    for header in (None, "", "not base64 at all", "e30="):
        with pytest.raises(leasekit.ServiceError) as raised:
            _offer(header)
        assert raised.value.status == 402, header


def test_a_refusal_after_the_loss_was_judged_keeps_the_first_reason() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    now.at = 129.0
    r.next(False)
    now.at = 130.0
    assert r.lost
    r.next(lease(False, rules=("NO_HOLD",)))
    assert r.clock.lost_rule is None and "no renewal" in (r.clock.lost_reason or "")


def test_stopping_releases_within_the_deadline() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    assert bound(r.next(True), Release) == pytest.approx(129.45)
    assert r.next(lease(True)) is None
    assert r.next(None) is None, "nothing after the release"


def test_stopping_after_a_failed_renewal_releases_too() -> None:
    r = held(Now(100.0))
    r.next()
    r.next(False)
    r.next(leasekit.Unavailable("no answer"))
    assert isinstance(r.next(True), Release)


def test_stopping_a_lost_lease_releases_nothing() -> None:
    now = Now(100.0)
    r = held(now)
    r.next()
    now.at = 129.45
    assert r.next(True) is None
    assert r.lost


def test_a_finished_renewal_stays_finished() -> None:
    r = held(Now())
    r.next()
    r.next(False)
    r.next(lease(False, rules=("NO_HOLD",)))
    assert [r.next(None), r.next(False), r.next(lease(True))] == [None, None, None]


def test_lost_turns_true_at_the_deadline_and_stays() -> None:
    now = Now(100.0)
    r = held(now)
    now.at = 129.45 - 1e-6
    assert not r.lost
    r.check()
    now.at = 129.45
    assert r.lost
    now.at = 100.0
    assert r.lost, "a loss, once judged, is final"


def test_waiting_for_the_loss_waits_until_the_deadline_or_the_timeout() -> None:
    now = Now(100.0)
    r = held(now)
    waits = r.waits(5.0)
    assert next(waits) == pytest.approx(5.0), "the timeout first"
    now.at = 105.0
    assert list(waits) == [] and not r.lost, "timed out"
    waits = r.waits(None)
    assert next(waits) == pytest.approx(24.45), "until the deadline"
    now.at = 129.45
    assert list(waits) == [] and r.lost, "lost"
    assert list(r.waits(10.0)) == [], "already lost"
