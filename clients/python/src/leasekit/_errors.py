"""Typed exceptions: one class per kind of refusal the API answers, and one for no answer."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._model import Done


class LeasekitError(Exception):
    """Any error of this client. `status` and `code` are the API's (0 and "" when none came)."""

    def __init__(self, message: str, *, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


class InvalidInput(LeasekitError):
    """400: the request broke the input schema; nothing was written or charged."""


class Unauthorized(LeasekitError):
    """401: a malformed, unknown or revoked API key."""


class PaymentRequired(LeasekitError):
    """402: no API key and no (valid) x402 payment."""


class Forbidden(LeasekitError):
    """403."""


class IdempotencyConflict(LeasekitError):
    """409: this requestId was used before with different input."""


class PaymentInProgress(LeasekitError):
    """409: the first call with this payment has not finished; the same call may be sent again."""


class PaymentIdentifierConflict(LeasekitError):
    """409: this payment identifier was used with another payment or another request."""


class PayloadTooLarge(LeasekitError):
    """413: the body is over 64 KiB."""


class RateLimited(LeasekitError):
    """429: try again after `retry_after` seconds."""

    def __init__(self, message: str, *, status: int = 429, code: str = "", retry_after: float = 1.0) -> None:
        super().__init__(message, status=status, code=code)
        self.retry_after = retry_after


class StoreUnavailable(LeasekitError):
    """502: the store failed or its answer is unknown; a retry with the same requestId is safe."""


class ServiceError(LeasekitError):
    """Any other answer the client does not expect (a 5xx, or a body it cannot read)."""


class Unavailable(LeasekitError):
    """No answer: the service could not be reached, or did not answer in time."""


class NotAcquired(LeasekitError):
    """`lease()` could not acquire the resource within `wait`; `holder` held it when it gave up."""

    def __init__(self, message: str, *, holder: str | None) -> None:
        super().__init__(message)
        self.holder = holder


class Finished(NotAcquired):
    """The resource is finished (someone released it with done): `done` says who finished it,
    with which token, when, and what the work produced. Nobody is granted it until the mark ends
    or someone reopens it; for `claim_next`, every candidate not held is finished."""

    def __init__(self, message: str, *, done: Done | None) -> None:
        super().__init__(message, holder=done.holder if done is not None else None)
        self.done = done


class LeaseLost(LeasekitError):
    """A held lease ended: a renewal was refused (`rule` says why) or none got through in time."""

    def __init__(self, message: str, *, rule: str | None) -> None:
        super().__init__(message)
        self.rule = rule


_BY_STATUS: dict[int, type[LeasekitError]] = {
    400: InvalidInput,
    401: Unauthorized,
    402: PaymentRequired,
    403: Forbidden,
    409: IdempotencyConflict,
    413: PayloadTooLarge,
    502: StoreUnavailable,
}


_BY_CODE: dict[str, type[LeasekitError]] = {
    "PAYMENT_IN_PROGRESS": PaymentInProgress,
    "PAYMENT_IDENTIFIER_CONFLICT": PaymentIdentifierConflict,
}


def from_answer(status: int, body: object, retry_after: str | None) -> LeasekitError:
    """The exception for an error answer `status` with its JSON `body`."""
    message, code = f"HTTP {status}", ""
    if isinstance(body, dict):
        message = str(body.get("error", message))
        code = str(body.get("code", ""))
    if status == 429:
        # Seconds, a number that means one (not negative, not nan or inf); anything else, such
        # as an HTTP date, is read as a second (it used to reach sleep() as is, and crash it).
        try:
            wait = float(retry_after) if retry_after else 1.0
        except ValueError:
            wait = 1.0
        if not math.isfinite(wait) or wait < 0:
            wait = 1.0
        return RateLimited(message, code=code, retry_after=wait)
    kind = _BY_CODE.get(code) or _BY_STATUS.get(status, ServiceError)
    return kind(message, status=status, code=code)
