// The client: one method per op of the lease API, and `withLease`.

import { type Transport, call } from "./call.js";
import { type HeldLease, type HoldOptions, MAX_SERVER_WAIT, withLease } from "./held.js";
import {
  type Lease,
  type Leader,
  type Page,
  type SessionState,
  body,
  leaderOf,
  newRequestId,
  pageOf,
} from "./model.js";
import { type HeldSession, type SessionOptions, withSession } from "./session.js";
import { type Wallet, payerFor } from "./x402.js";

export interface ClientOptions {
  /** The service's base URL, e.g. `http://127.0.0.1:3000`. */
  readonly url: string;
  /** An API key (its account is the tenant namespace); or give `wallet`. */
  readonly apiKey?: string;
  /** Pay per call over x402 from this viem account (the wallet is the tenant); or give `apiKey`. */
  readonly wallet?: Wallet;
  /** The tenant within the key's account (default "default"). */
  readonly tenant?: string;
  /** Each attempt's timeout, ms (default 10000; a waiting acquire gets its wait on top). */
  readonly timeoutMs?: number;
  /** Retries of a call that got no answer, a 502, a 5xx or a 429 (default 3). */
  readonly retries?: number;
  /** The fetch to send with (default: the global one). */
  readonly fetch?: typeof globalThis.fetch;
}

/** Options every call takes: `signal` aborts it (and its retries). */
export interface CallOptions {
  readonly signal?: AbortSignal;
}

/** Options of a mutation: `requestId` (made for you) is kept across the call's own retries. */
export interface MutationOptions extends CallOptions {
  readonly requestId?: string;
}

/**
 * A leasekit client over HTTP, with an API key, or paying per call over x402 from a wallet.
 *
 * Every mutation carries a request id, made once and kept across that call's own retries (no
 * answer, a 502, a 5xx, a 429), so a retry never applies twice: a retry whose first answer was
 * lost gets the stored answer (`replayed: true`). A paid call's payment is made once and resent
 * on those retries, named with a payment identifier, so it is charged once; a 409
 * PAYMENT_IN_PROGRESS (the first attempt still open) is waited out, not paid again. A refusal by
 * a rule (LEASE_HELD, TOKEN_MISMATCH, ...) is an answer (`granted: false`, `rules`), not an
 * error; errors are typed (`InvalidInput`, `Unauthorized`, ... all `LeasekitError`).
 */
export class LeaseClient {
  readonly tenant: string;
  readonly #t: Transport;

  constructor(options: ClientOptions) {
    if ((options.apiKey === undefined) === (options.wallet === undefined)) {
      throw new TypeError("give exactly one of apiKey and wallet");
    }
    this.tenant = options.tenant ?? "default";
    const fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#t = {
      url: options.url.replace(/\/+$/, ""),
      headers: options.apiKey === undefined ? {} : { "x-api-key": options.apiKey },
      timeoutMs: options.timeoutMs ?? 10_000,
      retries: options.retries ?? 3,
      fetch,
      payer: options.wallet === undefined ? null : payerFor(options.wallet),
      now: () => performance.now(),
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    };
  }

  #call(fields: Record<string, unknown>, options: CallOptions = {}): Promise<Lease> {
    return call(this.#t, body({ ...fields, tenantId: this.tenant }), { signal: options.signal });
  }

  #mutate(fields: Record<string, unknown>, options: MutationOptions): Promise<Lease> {
    return this.#call({ ...fields, requestId: options.requestId ?? newRequestId() }, options);
  }

  /**
   * Acquire `resource` for `ttl` seconds (default 30); `granted` says whether you hold it now.
   * With `limit` (1-64), one of that many permits (a semaphore), each with its own token. With
   * `wait` (0-20 s), a caller who is not granted at once waits in the resource's queue (first
   * come, first served) and is answered as soon as the permit is its own, or when the wait ends
   * ungranted with its `queuePosition`.
   */
  acquire(
    resource: string,
    options: MutationOptions & { holder: string; ttl?: number; limit?: number; wait?: number; value?: string },
  ): Promise<Lease> {
    const { holder, ttl, limit, wait, value } = options;
    return this.#mutate(
      { op: "acquire", resource, holder, ttlSeconds: ttl ?? 30, limit, waitSeconds: wait || undefined, value },
      options,
    );
  }

  /** Acquire every one of `resources` (2-50) or none, in one transaction; `leases` has each token. */
  acquireAll(
    resources: readonly string[],
    options: MutationOptions & { holder: string; ttl?: number; limit?: number },
  ): Promise<Lease> {
    const { holder, ttl, limit } = options;
    return this.#mutate({ op: "acquire", resources, holder, ttlSeconds: ttl ?? 30, limit }, options);
  }

  /**
   * Extend a lease you hold to `ttl` seconds from now; refused once it has lapsed. With `value`,
   * its value changes too (absent: kept).
   */
  renew(
    resource: string,
    options: MutationOptions & { holder: string; token: number; ttl?: number; value?: string },
  ): Promise<Lease> {
    const { holder, token, ttl, value } = options;
    return this.#mutate({ op: "renew", resource, holder, token, ttlSeconds: ttl ?? 30, value }, options);
  }

  /** Renew a whole set, each [resource, token]: all or none. */
  renewAll(
    leases: readonly (readonly [string, number])[],
    options: MutationOptions & { holder: string; ttl?: number },
  ): Promise<Lease> {
    return this.#mutate(
      { op: "renew", leases: setLeases(leases), holder: options.holder, ttlSeconds: options.ttl ?? 30 },
      options,
    );
  }

  /**
   * Release a lease you hold. With `done`, the resource is finished: nobody is granted it for
   * `keepDone` seconds (default a week) unless someone reopens it, and every acquire is told who
   * finished it and `result` (0-1024 bytes); `done` in the answer is the mark.
   */
  release(
    resource: string,
    options: MutationOptions & { holder: string; token: number; done?: boolean; result?: string; keepDone?: number },
  ): Promise<Lease> {
    const { holder, token, done, result, keepDone } = options;
    return this.#mutate(
      { op: "release", resource, holder, token, done: done || undefined, result, keepDoneSeconds: keepDone },
      options,
    );
  }

  /**
   * End `resource`'s finished mark early, with `reason` kept in the audit: as its finisher
   * (`holder` and the `token` it finished with) or, naming none, with an admin key or the paying
   * wallet (else `Forbidden`). The next grant's token continues from the counter.
   */
  reopen(resource: string, options: MutationOptions & { reason: string; holder?: string; token?: number }): Promise<Lease> {
    const { reason, holder, token } = options;
    return this.#mutate({ op: "reopen", resource, reason, holder, token }, options);
  }

  /** Release a whole set, each [resource, token]: all or none. */
  releaseAll(leases: readonly (readonly [string, number])[], options: MutationOptions & { holder: string }): Promise<Lease> {
    return this.#mutate({ op: "release", leases: setLeases(leases), holder: options.holder }, options);
  }

  /** Who holds `resource` now. */
  get(resource: string, options: CallOptions = {}): Promise<Lease> {
    return this.#call({ op: "get", resource }, options);
  }

  /**
   * `resource` once its state is no longer the one `stateTag` names (at once without one:
   * `changed` true), or when `wait` seconds (0-20, default 20) have passed (`changed` false, the
   * same tag). The answer is a get's, with `stateTag` for the next watch.
   */
  watch(resource: string, options: CallOptions & { stateTag?: string | null; wait?: number } = {}): Promise<Lease> {
    const waitSeconds = Math.min(MAX_SERVER_WAIT, Math.max(0, Math.floor(options.wait ?? MAX_SERVER_WAIT)));
    return this.#call({ op: "watch", resource, stateTag: options.stateTag ?? undefined, waitSeconds }, options);
  }

  /** Who leads `resource` now (null: nobody). */
  async leader(resource: string, options: CallOptions = {}): Promise<Leader | null> {
    return leaderOf(await this.get(resource, options));
  }

  /**
   * The leader of `resource` as it stands, then each time it changes (a new leader, a new value,
   * or nobody: null), from watches chained on the state's tag: every leader it yields held a
   * live permit when its answer was made (a lapse is a change), and it never skips the last
   * change. Runs until you leave the loop or `signal` aborts (the generator then ends).
   */
  async *observe(resource: string, options: CallOptions & { wait?: number } = {}): AsyncGenerator<Leader | null> {
    let stateTag: string | null = null;
    for (;;) {
      let answer: Lease;
      try {
        answer = await this.watch(resource, { ...options, stateTag });
      } catch (error) {
        if (options.signal?.aborted) return;
        throw error;
      }
      if (answer.changed === true) yield leaderOf(answer);
      stateTag = answer.stateTag;
    }
  }

  /**
   * Lead `resource` while `fn` runs: wait in its queue (up to `wait` seconds; by default until
   * elected), then hold it with `value` (your address), renewed in the background;
   * `lease.proclaim(value)` changes the value while you lead, and `lease.signal` aborts when you
   * may no longer be the leader. Returning (or throwing) from `fn` resigns.
   */
  campaign<T>(
    resource: string,
    options: { holder: string; value: string; ttl?: number; wait?: number },
    fn: (lease: HeldLease) => Promise<T> | T,
  ): Promise<T> {
    return withLease(this.#t, this.tenant, [resource], { ...options, wait: options.wait ?? Infinity, limit: 1 }, fn);
  }

  /**
   * Whether `token` (of `holder`, if given) is a live permit of `resource`: `current`. The fence
   * for a store that cannot keep its own highest token, and the only one for a semaphore.
   */
  check(resource: string, token: number, options: CallOptions & { holder?: string } = {}): Promise<Lease> {
    return this.#call({ op: "check", resource, token, holder: options.holder }, options);
  }

  /**
   * End `holder`'s permit of `resource` (every permit when no holder is given) at once, with
   * `reason` (1-200 characters) kept in the audit; with `token`, only the permit with that
   * token. An API key with the admin role, or a paying wallet in its own tenant (else
   * `Forbidden`). `revoked` lists what it ended; not granted (NO_HOLD) when nothing was live.
   * The revoked holder's next renew is refused with REVOKED.
   */
  revoke(
    resource: string,
    options: MutationOptions & { reason: string; holder?: string; token?: number },
  ): Promise<Lease> {
    const { reason, holder, token } = options;
    return this.#mutate({ op: "revoke", resource, reason, holder, token }, options);
  }

  /**
   * End `session` and every permit in it at once, with `reason` kept in the audit (the callers
   * `revoke` allows). `revoked` lists the permits it ended; not granted (SESSION_EXPIRED) when
   * it had ended already.
   */
  revokeSession(session: string, options: MutationOptions & { reason: string }): Promise<Lease> {
    return this.#mutate({ op: "revoke", session, reason: options.reason }, options);
  }

  /** `session` as it stands (its live permits in `leases`); null once it has ended. */
  async getSession(session: string, options: CallOptions = {}): Promise<SessionState | null> {
    return (await this.#call({ op: "get", session }, options)).session;
  }

  /**
   * A page of your tenant's resources with a live permit or waiter, by name (advisory: a grant
   * shows within about 2 s). Pass `nextCursor` back as `cursor` for the next page.
   */
  async list(options: CallOptions & { prefix?: string; cursor?: string; pageSize?: number } = {}): Promise<Page> {
    const { prefix, cursor, pageSize } = options;
    return pageOf(await this.#call({ op: "list", prefix, cursor, pageSize }, options));
  }

  /** A page of the revoke audit, newest first (`entries`): an admin key's or a wallet's. */
  async audit(options: CallOptions & { resource?: string; cursor?: string; pageSize?: number } = {}): Promise<Page> {
    const { resource, cursor, pageSize } = options;
    return pageOf(await this.#call({ op: "audit", resource, cursor, pageSize }, options));
  }

  /**
   * Hold `resource` (or every one of a list of resources, as one set) while `fn` runs: acquired
   * (waiting up to `wait` seconds, else `NotAcquired`), renewed in the background a third of the
   * way to its local deadline, released when `fn` returns or throws. `lease.signal` aborts the
   * moment the lease may be someone else's (a renewal refused, or none through by the local
   * deadline: the send time of the last grant plus the TTL minus 1% and 250 ms); pass it to
   * fetch and child processes, and send `lease.token` with every write the lease protects.
   */
  withLease<T>(
    resource: string | readonly string[],
    options: HoldOptions,
    fn: (lease: HeldLease) => Promise<T> | T,
  ): Promise<T> {
    const resources = typeof resource === "string" ? [resource] : [...resource];
    return withLease(this.#t, this.tenant, resources, options, fn);
  }

  /**
   * Hold the first of `candidates` (2-50 distinct names, in the order given) that can be granted
   * now while `fn` runs: not held to its limit, not finished, nobody waiting ahead
   * (`lease.resources[0]` and `lease.token` name the one won). `NotAcquired` when none is free
   * now; `Finished` when every one is finished. End the work with `lease.finish(result)`.
   */
  claimNext<T>(
    candidates: readonly string[],
    options: Omit<HoldOptions, "wait" | "limit">,
    fn: (lease: HeldLease) => Promise<T> | T,
  ): Promise<T> {
    return withLease(this.#t, this.tenant, [...candidates], { ...options, candidates: true }, fn);
  }

  /**
   * Open a session and run `fn` with it: one keepalive in the background (on the same
   * local-deadline rule) for any number of holds taken with `session.acquire` and
   * `session.acquireAll`, each living exactly as long as the session; `session.signal` aborts
   * once for all of them. The session is closed when `fn` returns or throws: every hold in it
   * ends at once, its waiters served.
   */
  withSession<T>(options: SessionOptions, fn: (session: HeldSession) => Promise<T> | T): Promise<T> {
    return withSession(this.#t, this.tenant, options, fn);
  }
}

function setLeases(leases: readonly (readonly [string, number])[]): { resource: string; token: number }[] {
  return leases.map(([resource, token]) => ({ resource, token }));
}
