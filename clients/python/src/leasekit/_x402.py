"""Paying per call over x402 with the official SDK (`pip install 'leasekit[x402]'`).

A call's payment is made once, when the service first answers 402, and sent again unchanged on
that call's own retries. It carries a payment identifier (the x402 `payment-identifier`
extension) wherever the service declares it, so a retry after a lost answer gets the answer it
paid for and is charged once. Only when the service says the payment bought nothing (the first
attempt failed, so nothing was charged) is a new one made, with a new identifier.
"""

from __future__ import annotations

from typing import Any

from ._errors import ServiceError

#: The payment's header; the 402 offer's header.
PAYMENT_SIGNATURE = "payment-signature"
PAYMENT_REQUIRED = "payment-required"

try:  # The SDK is an extra: only a paying client needs it.
    from x402 import x402Client, x402ClientSync
    from x402.extensions.payment_identifier import append_payment_identifier_to_extensions, generate_payment_id
    from x402.http.utils import decode_payment_required_header, encode_payment_signature_header
    from x402.mechanisms.evm.exact.register import register_exact_evm_client
    from x402.schemas import PaymentPayload, PaymentRequired
except ImportError:  # pragma: no cover - said when a paying client is made
    x402Client = x402ClientSync = None  # type: ignore[assignment,misc]


def _missing() -> RuntimeError:
    return RuntimeError("paying with a wallet needs the x402 SDK: pip install 'leasekit[x402]'")


def _offer(header: str | None) -> PaymentRequired:
    """The offer of a 402. One that cannot be read is the service's error, a `ServiceError`, like
    any answer the client cannot read (a `ValueError` used to end a held lease's renewer)."""
    if not header:
        raise ServiceError("a 402 without the PAYMENT-REQUIRED header", status=402)
    try:
        required = decode_payment_required_header(header)
    except Exception as e:  # the SDK's decoding raises what base64, JSON and pydantic raise
        raise ServiceError(f"a 402 offer that cannot be read: {e}", status=402) from e
    if not isinstance(required, PaymentRequired):
        raise ServiceError("a 402 offer of another x402 version", status=402)
    return required


def _unpayable(error: Exception) -> ServiceError:
    """An offer the SDK cannot pay (no scheme it knows, say): the service's answer the client
    cannot use, like an unreadable one (the SDK's own exception used to end a held lease's
    renewer, and escape an `async with`)."""
    return ServiceError(f"the 402 offer cannot be paid: {error}", status=402)


def _named(payload: Any, required: PaymentRequired) -> str:
    """The header for `payload`, named with a new payment identifier if the service declared the
    extension (the SDK's helper adds it only then)."""
    extensions: dict[str, Any] = dict(payload.extensions or required.extensions or {})
    append_payment_identifier_to_extensions(extensions, generate_payment_id())
    named: PaymentPayload = payload.model_copy(update={"extensions": extensions or None})
    return encode_payment_signature_header(named)


class Payer:
    """Makes x402 payments from an `eth_account` account (`LocalAccount`), blocking."""

    def __init__(self, account: Any) -> None:
        if x402ClientSync is None:
            raise _missing()
        self._client = x402ClientSync()
        register_exact_evm_client(self._client, account)

    def pay(self, offer_header: str | None) -> str:
        """The `PAYMENT-SIGNATURE` value answering the 402 whose offer header is `offer_header`."""
        required = _offer(offer_header)
        try:
            payload = self._client.create_payment_payload(required)
        except Exception as e:  # the SDK's errors have no common base
            raise _unpayable(e) from e
        return _named(payload, required)


class AsyncPayer:
    """`Payer` for asyncio."""

    def __init__(self, account: Any) -> None:
        if x402Client is None:
            raise _missing()
        self._client = x402Client()
        register_exact_evm_client(self._client, account)

    async def pay(self, offer_header: str | None) -> str:
        required = _offer(offer_header)
        try:
            payload = await self._client.create_payment_payload(required)
        except Exception as e:  # the SDK's errors have no common base
            raise _unpayable(e) from e
        return _named(payload, required)
