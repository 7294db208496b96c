// A session held while a function runs: one keepalive for any number of holds, one signal for
// the loss of all of them, closed (every hold in it ended at once) on return or throw.

import { type Transport, call } from "./call.js";
import { type Clock } from "./clock.js";
import { InvalidInput, LeaseLost, NotAcquired, ServiceError } from "./errors.js";
import { ACQUIRE_PAUSE_MS, MAX_SERVER_WAIT, keep } from "./held.js";
import { type Lease, body, newRequestId } from "./model.js";

export interface SessionOptions {
  /** Who holds it, and every hold in it. */
  readonly holder: string;
  /** Seconds it lasts after each keepalive (1-3600; default 30). */
  readonly ttl?: number;
}

/** The rules by which an acquire in a session learns that the session, and every hold in it, has ended. */
const ENDED = ["SESSION_EXPIRED", "NOT_HOLDER"];

/**
 * What a held session's owner sees of it. Every hold acquired in it lives exactly as long as the
 * session on the service, so the session's local deadline and `signal` are each hold's.
 */
export class HeldSession {
  readonly id: string;
  readonly holder: string;
  readonly ttl: number;
  /** Aborted, with a `LeaseLost` as its reason, once the session (and so every hold in it) may be someone else's. */
  readonly signal: AbortSignal;
  readonly #tokens = new Map<string, number>();
  readonly #t: Transport;
  readonly #tenant: string;
  readonly #clock: Clock;
  readonly #lose: (rule: string) => void;

  constructor(init: {
    id: string;
    holder: string;
    ttl: number;
    t: Transport;
    tenant: string;
    clock: Clock;
    signal: AbortSignal;
    lose: (rule: string) => void;
  }) {
    this.id = init.id;
    this.holder = init.holder;
    this.ttl = init.ttl;
    this.signal = init.signal;
    this.#t = init.t;
    this.#tenant = init.tenant;
    this.#clock = init.clock;
    this.#lose = init.lose;
  }

  /** Each live hold's fencing token, by resource. */
  get tokens(): Readonly<Record<string, number>> {
    return Object.fromEntries(this.#tokens);
  }

  /** The local deadline (a `performance.now()` instant) of the session and every hold in it. */
  get deadline(): number {
    return this.#clock.deadline;
  }

  /** Whether the session is lost (judged now, against the local deadline). */
  get lost(): boolean {
    return this.#clock.judge(this.#t.now());
  }

  /** Throw `LeaseLost` if the session is lost. */
  check(): void {
    if (this.lost) throw new LeaseLost(this.#clock.lostReason ?? "lost", this.#clock.lostRule);
  }

  /**
   * Hold `resource` (one of `limit` permits) in the session: its fencing token. Waits up to
   * `wait` seconds in its queue (first come, first served) when someone else holds it, then
   * throws `NotAcquired`; `LeaseLost` when the session has ended (the signal fires with it),
   * `InvalidInput` for a full session (256 holds) or another limit.
   */
  async acquire(resource: string, options: { limit?: number; wait?: number } = {}): Promise<number> {
    const limit = options.limit ?? 1;
    const tokens = await this.#acquire([resource], { resource, limit: limit === 1 ? undefined : limit }, options.wait ?? 0);
    return tokens[resource] ?? 0;
  }

  /** Hold every one of `resources` (2-50) in the session, or none: each one's token. */
  acquireAll(resources: readonly string[]): Promise<Record<string, number>> {
    return this.#acquire(resources, { resources }, 0);
  }

  /** Give back one hold before the session ends (the others stay). */
  async release(resource: string): Promise<Lease> {
    const token = this.#tokens.get(resource);
    if (token === undefined) throw new InvalidInput(`${resource} is not held in this session`, {});
    const answer = await call(this.#t, this.#body("release", { resource, token }));
    if (answer.granted) this.#tokens.delete(resource);
    return answer;
  }

  #body(op: string, fields: Record<string, unknown>): Record<string, unknown> {
    return body({ op, tenantId: this.#tenant, holder: this.holder, requestId: newRequestId(), ...fields });
  }

  async #acquire(resources: readonly string[], target: Record<string, unknown>, wait: number): Promise<Record<string, number>> {
    const giveUp = this.#t.now() + wait * 1000;
    for (;;) {
      // Nothing is sent once the session is lost: a grant would be worth nothing.
      this.check();
      const left = giveUp - this.#t.now();
      const serverWait = resources.length === 1 && left >= 1000 ? Math.floor(Math.min(MAX_SERVER_WAIT, left / 1000)) : 0;
      const answer = await call(
        this.#t,
        this.#body("acquire", { ...target, session: this.id, waitSeconds: serverWait > 0 ? serverWait : undefined }),
      );
      if (answer.granted) {
        const tokens: Record<string, number> =
          answer.leases !== null
            ? Object.fromEntries(answer.leases.filter((m) => m.token !== null).map((m) => [m.resource, m.token as number]))
            : { [resources[0] ?? ""]: answer.token ?? 0 };
        this.check();
        for (const [resource, token] of Object.entries(tokens)) this.#tokens.set(resource, token);
        return tokens;
      }
      const rule = answer.rules[0] ?? "refused";
      if (ENDED.includes(rule)) {
        this.#lose(rule);
        this.check();
      }
      if (rule === "SESSION_FULL") {
        throw new InvalidInput(`session ${this.id} holds as many permits as a session may (256)`, { code: rule });
      }
      if (rule === "LIMIT_MISMATCH") {
        throw new InvalidInput(`${resources.join(", ")} is held under limit ${answer.limit}`, { code: rule });
      }
      const remaining = giveUp - this.#t.now();
      if (remaining <= 0) {
        const holder = answer.leases?.find((m) => !m.granted)?.holder ?? answer.holder;
        throw new NotAcquired(`${resources.join(", ")} is held by ${holder}`, holder);
      }
      // After a wait on the service (which kept the place) ask again at once; else a little later.
      if (serverWait === 0) await this.#t.sleep(Math.min(ACQUIRE_PAUSE_MS, remaining));
    }
  }
}

/**
 * Open a session and run `fn` with it: kept alive in the background on the held lease's rule,
 * closed when `fn` returns or throws (every hold in it ends then, its waiters served).
 */
export async function withSession<T>(
  t: Transport,
  tenant: string,
  options: SessionOptions,
  fn: (session: HeldSession) => Promise<T> | T,
): Promise<T> {
  const ttl = options.ttl ?? 30;
  const { holder } = options;
  const request = (op: string, fields: Record<string, unknown>) =>
    body({ op, tenantId: tenant, holder, requestId: newRequestId(), ...fields });
  const sent = t.now();
  const opened = await call(t, request("open", { ttlSeconds: ttl }));
  const id = opened.session?.id;
  if (id === undefined) throw new ServiceError("open answered no session", { status: 200 });
  return keep(
    t,
    ttl,
    sent,
    {
      renewal: () => request("keepalive", { session: id, ttlSeconds: ttl }),
      ending: () => request("close", { session: id }),
    },
    (kept) => fn(new HeldSession({ id, holder, ttl, t, tenant, clock: kept.clock, signal: kept.signal, lose: kept.lose })),
  );
}
