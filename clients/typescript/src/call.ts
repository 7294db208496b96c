// One call to the service: each attempt's timeout, paying a 402, retrying, giving up.

import {
  LeasekitError,
  PaymentInProgress,
  RateLimited,
  ServiceError,
  StoreUnavailable,
  Unavailable,
  fromAnswer,
} from "./errors.js";
import { type Lease, leaseFrom } from "./model.js";
import { PAYMENT_REQUIRED, PAYMENT_SIGNATURE, type Payer } from "./x402.js";

export const PATH = "/api/v1/lease";
/**
 * While the first call with a payment is still open (409 PAYMENT_IN_PROGRESS), wait for it
 * rather than pay again: at worst until the service's sweeper closes it, within a minute of a
 * crash. So many more attempts, a second apart, on top of `retries`.
 */
export const IN_PROGRESS_TRIES = 75;
const IN_PROGRESS_PAUSE_MS = 1000;
/** The longest a 429's Retry-After is waited out (s); a longer one is the call's error at once. */
export const MAX_RETRY_AFTER = 30;

/** What every call of a client shares. */
export interface Transport {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly fetch: typeof globalThis.fetch;
  readonly payer: Payer | null;
  /** This process's monotonic clock (ms). */
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
}

/** Whether the same call may be sent again: no answer, a store failure, a 5xx, a 429. */
export function retryable(error: LeasekitError): boolean {
  return (
    error instanceof Unavailable ||
    error instanceof StoreUnavailable ||
    error instanceof RateLimited ||
    error instanceof PaymentInProgress ||
    (error instanceof ServiceError && error.status >= 500)
  );
}

/** The pause (ms) after the `failures + 1`-th failure: a 429's ask, a second while a payment is in progress, else doubling from 100 ms up to 2 s. */
export function backoffMs(failures: number, error: LeasekitError): number {
  if (error instanceof RateLimited) return error.retryAfter * 1000;
  if (error instanceof PaymentInProgress) return IN_PROGRESS_PAUSE_MS;
  return Math.min(100 * 2 ** failures, 2000);
}

/**
 * Send `request` until it is answered. Every attempt sends the same body (a mutation's request
 * id included), so a retry whose first answer was lost gets the stored answer. A payment is made
 * once and resent unchanged on the retries; a new one only when the service answers 402 again
 * (the last bought nothing), at most `retries + 1` in all. A failure is retried `retries` times
 * if `retryable` (a payment in progress `IN_PROGRESS_TRIES` more), after `backoffMs`;
 * `deadline` (a `now()` instant) and `signal` bound the call and its retries.
 */
export async function call(
  t: Transport,
  request: Record<string, unknown>,
  options: { deadline?: number | undefined; signal?: AbortSignal | undefined } = {},
): Promise<Lease> {
  const { deadline, signal } = options;
  const body = JSON.stringify(request);
  // A call that waits on the service is given its wait on top of the usual timeout.
  const timeoutMs = t.timeoutMs + (typeof request.waitSeconds === "number" ? request.waitSeconds * 1000 : 0);
  let failures = 0;
  let payments = 0;
  let payment: string | null = null;
  for (;;) {
    let error: LeasekitError = new Unavailable("no answer");
    const left = deadline === undefined ? Infinity : deadline - t.now();
    if (left <= 0) throw new Unavailable("no answer before the deadline");
    signal?.throwIfAborted();
    const attempt = AbortSignal.timeout(Math.max(1, Math.ceil(Math.min(timeoutMs, left))));
    const headers: Record<string, string> = { "content-type": "application/json", ...t.headers };
    if (payment !== null) headers[PAYMENT_SIGNATURE] = payment;
    let response: Response | undefined;
    try {
      response = await t.fetch(`${t.url}${PATH}`, {
        method: "POST",
        headers,
        body,
        signal: signal ? AbortSignal.any([attempt, signal]) : attempt,
      });
    } catch (e) {
      signal?.throwIfAborted();
      error = new Unavailable(`the service did not answer: ${String(e)}`);
    }
    if (response !== undefined) {
      const text = await response.text().catch(() => null);
      let parsed: unknown = null;
      try {
        parsed = text === null ? null : JSON.parse(text);
      } catch {
        parsed = null;
      }
      if (response.status === 402 && t.payer !== null && payments <= t.retries) {
        payment = await t.payer(response.headers.get(PAYMENT_REQUIRED));
        payments += 1;
        continue;
      }
      if (response.status === 200) return leaseFrom(parsed);
      error =
        text === null
          ? new Unavailable("the answer was cut off")
          : fromAnswer(response.status, parsed, response.headers.get("retry-after"));
    }
    const pause = backoffMs(failures, error);
    const allowed = error instanceof PaymentInProgress ? t.retries + IN_PROGRESS_TRIES : t.retries;
    if (
      !retryable(error) ||
      failures >= allowed ||
      pause > MAX_RETRY_AFTER * 1000 ||
      (deadline !== undefined && t.now() + pause >= deadline)
    ) {
      throw error;
    }
    failures += 1;
    await t.sleep(pause);
  }
}
