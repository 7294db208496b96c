// Typed errors: one class per kind of refusal the API answers, and one for no answer.

import type { Done } from "./model.js";

/** Any error of this client. `status` and `code` are the API's (0 and "" when none came). */
export class LeasekitError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(message: string, options: { status?: number; code?: string } = {}) {
    super(message);
    this.name = new.target.name;
    this.status = options.status ?? 0;
    this.code = options.code ?? "";
  }
}

/** 400: the request broke the input schema; nothing was written or charged. */
export class InvalidInput extends LeasekitError {}
/** 401: a malformed, unknown or revoked API key. */
export class Unauthorized extends LeasekitError {}
/** 402: no API key and no (valid) x402 payment. */
export class PaymentRequired extends LeasekitError {}
/** 403: an admin op (revoke, audit) without the admin role. */
export class Forbidden extends LeasekitError {}
/** 409: this requestId was used before with different input. */
export class IdempotencyConflict extends LeasekitError {}
/** 409: the first call with this payment has not finished; the same call may be sent again. */
export class PaymentInProgress extends LeasekitError {}
/** 409: this payment identifier was used with another payment or another request. */
export class PaymentIdentifierConflict extends LeasekitError {}
/** 413: the body is over 64 KiB. */
export class PayloadTooLarge extends LeasekitError {}
/** 502: the store failed or its answer is unknown; a retry with the same requestId is safe. */
export class StoreUnavailable extends LeasekitError {}
/** Any other answer the client does not expect (a 5xx, or a body it cannot read). */
export class ServiceError extends LeasekitError {}
/** No answer: the service could not be reached, or did not answer in time. */
export class Unavailable extends LeasekitError {}

/** 429: try again after `retryAfter` seconds. */
export class RateLimited extends LeasekitError {
  readonly retryAfter: number;

  constructor(message: string, options: { code?: string; retryAfter?: number } = {}) {
    super(message, { status: 429, ...(options.code === undefined ? {} : { code: options.code }) });
    this.retryAfter = options.retryAfter ?? 1;
  }
}

/** `withLease` could not acquire the resource within `wait`; `holder` held it when it gave up. */
export class NotAcquired extends LeasekitError {
  readonly holder: string | null;

  constructor(message: string, holder: string | null) {
    super(message);
    this.holder = holder;
  }
}

/**
 * The resource is finished (someone released it with done): `done` says who finished it, with
 * which token, when, and what the work produced. Nobody is granted it until the mark ends or
 * someone reopens it; for `claimNext`, every candidate not held is finished.
 */
export class Finished extends NotAcquired {
  readonly done: Done | null;

  constructor(message: string, done: Done | null) {
    super(message, done?.holder ?? null);
    this.done = done;
  }
}

/** A held lease ended: a renewal was refused (`rule` says why) or none got through in time. */
export class LeaseLost extends LeasekitError {
  readonly rule: string | null;

  constructor(message: string, rule: string | null) {
    super(message);
    this.rule = rule;
  }
}

/**
 * A store refused a fenced write (see `fencing`): its fence, the token that last wrote, is
 * larger than this write's `token`, or (a semaphore's permit) the permit is no longer current.
 * Nothing was written.
 */
export class FenceRefused extends LeasekitError {
  /** The token this write carried. */
  readonly token: number;
  /** The larger token the store holds; null when refused without one (`check` said the permit is not current, or S3's object kept changing). */
  readonly found: number | null;

  constructor(message: string, options: { token: number; found: number | null }) {
    super(message);
    this.token = options.token;
    this.found = options.found;
  }
}

const BY_STATUS: Record<number, new (message: string, options: { status: number; code: string }) => LeasekitError> = {
  400: InvalidInput,
  401: Unauthorized,
  402: PaymentRequired,
  403: Forbidden,
  409: IdempotencyConflict,
  413: PayloadTooLarge,
  502: StoreUnavailable,
};

const BY_CODE: Record<string, new (message: string, options: { status: number; code: string }) => LeasekitError> = {
  PAYMENT_IN_PROGRESS: PaymentInProgress,
  PAYMENT_IDENTIFIER_CONFLICT: PaymentIdentifierConflict,
};

/** The error for an error answer `status` with its JSON `body`. */
export function fromAnswer(status: number, body: unknown, retryAfter: string | null): LeasekitError {
  let message = `HTTP ${status}`;
  let code = "";
  if (typeof body === "object" && body !== null) {
    const fields = body as Record<string, unknown>;
    if (fields.error !== undefined) message = String(fields.error);
    if (fields.code !== undefined) code = String(fields.code);
  }
  if (status === 429) {
    // Seconds, a number that means one; anything else (an HTTP date, say) is read as a second.
    const wait = retryAfter === null || retryAfter.trim() === "" ? 1 : Number(retryAfter);
    return new RateLimited(message, { code, retryAfter: Number.isFinite(wait) && wait >= 0 ? wait : 1 });
  }
  const Kind = BY_CODE[code] ?? BY_STATUS[status] ?? ServiceError;
  return new Kind(message, { status, code });
}
