// A lease held while a function runs: acquired (waiting in the service's queue if asked),
// renewed in the background on the local-deadline rule (see `Clock`), released on return or
// throw; its `signal` fires the moment it may be someone else's.

import { type Transport, call } from "./call.js";
import { Clock } from "./clock.js";
import { Finished, InvalidInput, LeaseLost, NotAcquired } from "./errors.js";
import { type Lease, body, newRequestId } from "./model.js";

/** The longest wait one call asks the service for (its `waitSeconds` bound). */
export const MAX_SERVER_WAIT = 20;
/** Pause between tries to acquire while it may wait, when the service does not wait (ms). */
export const ACQUIRE_PAUSE_MS = 200;
/** Pause before trying a renewal again after a call that failed, its own retries spent (ms). */
export const RETRY_PAUSE_MS = 200;
/** How long the ending sent after the local deadline may take (ms). */
export const ENDING_GRACE_MS = 2000;

export interface HoldOptions {
  /** Who holds it: the same name across your retries and renewals. */
  readonly holder: string;
  /** Seconds each grant lasts on the service (1-3600; default 30). */
  readonly ttl?: number;
  /** Seconds to wait for it if someone else holds it (default 0: `NotAcquired` at once). */
  readonly wait?: number;
  /** How many holders the resource takes at once: a semaphore's limit (default 1, a lease). */
  readonly limit?: number;
  /** The permit's value (0-1024 bytes: a leader's address, progress), shown to get, watch, list. */
  readonly value?: string;
}

/** What a finish leaves (docs/adr/0012). */
export interface FinishOptions {
  /** Seconds the resource stays finished (default a week). */
  readonly keep?: number;
}

/** What a held lease's owner sees of it. */
export class HeldLease {
  readonly resources: readonly string[];
  readonly holder: string;
  readonly ttl: number;
  /** How many holders the resource takes at once: 1 for a lease, more for a semaphore's permit. */
  readonly limit: number;
  /** Each resource's fencing token; `token` is the first's. Send it with every write it fences. */
  readonly tokens: Readonly<Record<string, number>>;
  readonly token: number;
  /** The granted acquire's answer. */
  readonly answer: Lease;
  /** Aborted, with a `LeaseLost` as its reason, once the lease may be someone else's: pass it to fetch and child processes. */
  readonly signal: AbortSignal;
  readonly #clock: Clock;
  readonly #now: () => number;
  readonly #proclaim: (value: string) => Promise<Lease>;
  readonly #finish: (fields: Record<string, unknown>) => Promise<Lease>;
  readonly #isCurrent: () => Promise<Lease>;

  constructor(init: {
    resources: readonly string[];
    holder: string;
    ttl: number;
    limit: number;
    answer: Lease;
    clock: Clock;
    signal: AbortSignal;
    now: () => number;
    proclaim: (value: string) => Promise<Lease>;
    finish: (fields: Record<string, unknown>) => Promise<Lease>;
    isCurrent: () => Promise<Lease>;
  }) {
    this.resources = init.resources;
    this.holder = init.holder;
    this.ttl = init.ttl;
    this.limit = init.limit;
    this.answer = init.answer;
    this.#clock = init.clock;
    this.signal = init.signal;
    this.#now = init.now;
    this.#proclaim = init.proclaim;
    this.#finish = init.finish;
    this.#isCurrent = init.isCurrent;
    const first = init.resources[0] ?? "";
    this.tokens =
      init.answer.leases !== null
        ? Object.fromEntries(init.answer.leases.filter((m) => m.token !== null).map((m) => [m.resource, m.token as number]))
        : { [first]: init.answer.token ?? 0 };
    this.token = this.tokens[first] ?? 0;
  }

  /** The local deadline (a `performance.now()` instant): held until then at least, unless renewed. */
  get deadline(): number {
    return this.#clock.deadline;
  }

  /** Whether the lease is lost (judged now, against the local deadline). */
  get lost(): boolean {
    return this.#clock.judge(this.#now());
  }

  /** Throw `LeaseLost` if the lease is lost. */
  check(): void {
    if (this.lost) throw new LeaseLost(this.#clock.lostReason ?? "lost", this.#clock.lostRule);
  }

  /**
   * Whether the service says, now, that `token` is still this holder's live permit of the first
   * resource (a `check`, signed): for a semaphore's permit, whose token is no fence
   * (see `fencing`). The local deadline is not consulted: `lost` and `check()` judge that.
   */
  async isCurrent(): Promise<boolean> {
    return (await this.#isCurrent()).current === true;
  }

  /**
   * Change the value while you hold it (a renew with it): a leader's new address or progress.
   * `LeaseLost` when the token is no longer a live permit's (someone else leads, or nobody; the
   * signal fires too), or the lease was lost already: a deposed leader cannot speak for it.
   */
  async proclaim(value: string): Promise<Lease> {
    this.check();
    return this.#proclaim(value);
  }

  /**
   * The work is done: stop renewing and release with done, so that nobody is granted the
   * resource again for `keep` seconds (default a week) unless someone reopens it, and every
   * acquire is told who finished it and `result` (0-1024 bytes). The answer's `done` is the
   * mark. `LeaseLost` when the lease was lost first: nothing is marked (your writes may have
   * been fenced off). The function's return then releases nothing more.
   */
  async finish(result?: string, options: FinishOptions = {}): Promise<Lease> {
    if (this.resources.length > 1) throw new InvalidInput("a set is not finished whole: finish each resource");
    this.check();
    return this.#finish({ done: true, result, keepDoneSeconds: options.keep });
  }
}

/**
 * Acquire `resources` (one, or a set taken whole), waiting up to `wait` seconds: one resource
 * waits in the service's queue (`waitSeconds`, at most 20 s a try, the place kept between
 * tries); a set, which cannot wait there, is tried again `ACQUIRE_PAUSE_MS` apart, as is a
 * service from before waiting (it refuses the field). Each try has a new request id (a call's
 * own retries keep theirs). A grant that came after a wait is taken once more at once (the
 * holder's own acquire, the same token), so that the lease's clock starts at a send made after
 * the grant, however long the wait took. Then `fn` runs with the lease held.
 */
export async function withLease<T>(
  t: Transport,
  tenant: string,
  named: readonly string[],
  options: HoldOptions & { candidates?: boolean },
  fn: (lease: HeldLease) => Promise<T> | T,
): Promise<T> {
  const ttl = options.ttl ?? 30;
  const limit = options.limit ?? 1;
  const candidates = options.candidates === true;
  const isSet = named.length > 1 && !candidates;
  const { holder } = options;
  const request = (op: string, fields: Record<string, unknown>) =>
    body({ op, tenantId: tenant, holder, requestId: newRequestId(), ...fields });
  const target = candidates ? { candidates: named } : isSet ? { resources: named } : { resource: named[0] };

  // Acquire.
  const giveUp = t.now() + (options.wait ?? 0) * 1000;
  let serverWaits = !isSet && !candidates;
  let confirm = false;
  let answer: Lease;
  let sent: number;
  for (;;) {
    const left = giveUp - t.now();
    const wait = !confirm && serverWaits && left >= 1000 ? Math.floor(Math.min(MAX_SERVER_WAIT, left / 1000)) : 0;
    sent = t.now();
    try {
      answer = await call(
        t,
        request("acquire", {
          ...target,
          ttlSeconds: ttl,
          limit: limit === 1 ? undefined : limit,
          waitSeconds: wait > 0 ? wait : undefined,
          value: options.value,
        }),
      );
    } catch (error) {
      // A service from before waitSeconds refuses the field: try again at intervals.
      if (error instanceof InvalidInput && wait > 0 && error.message.includes("waitSeconds")) {
        serverWaits = false;
        continue;
      }
      throw error;
    }
    confirm = false;
    if (answer.granted && (answer.token !== null || answer.leases !== null)) {
      if (wait === 0) break;
      confirm = true;
      continue;
    }
    // Finished (every refusal is DONE: the resource, a set's blocking member, each candidate):
    // nobody is granted it while the mark stands, waiting would not help.
    if (answer.rules.length > 0 && answer.rules.every((rule) => rule === "DONE")) {
      const done = answer.done ?? answer.leases?.find((m) => m.done !== null)?.done ?? null;
      throw new Finished(`${named.join(", ")} is finished${done ? ` by ${done.holder}` : ""}`, done);
    }
    if (answer.rules.includes("LIMIT_MISMATCH")) {
      throw new NotAcquired(`${named.join(", ")} is held under limit ${answer.limit}`, answer.holder);
    }
    const now = t.now();
    if (now >= giveUp) throw new NotAcquired(`${named.join(", ")} is held by ${answer.holder}`, answer.holder);
    // The service waited and kept the place: ask again at once, while it can wait longer.
    if (answer.queuePosition !== null && serverWaits && giveUp - now >= 1000) continue;
    await t.sleep(Math.min(ACQUIRE_PAUSE_MS, giveUp - now));
  }

  // Hold: of candidates, the one won.
  const resources = candidates && answer.resource !== null ? [answer.resource] : named;
  let held: HeldLease | undefined;
  const leases = () => (held === undefined ? [] : leasesOf(held));
  return keep(
    t,
    ttl,
    sent,
    {
      renewal: () =>
        isSet
          ? request("renew", { leases: leases(), ttlSeconds: ttl })
          : request("renew", { resource: resources[0], token: held?.token, ttlSeconds: ttl }),
      ending: () =>
        isSet ? request("release", { leases: leases() }) : request("release", { resource: resources[0], token: held?.token }),
    },
    (kept) => {
      const proclaim = async (value: string) => {
        if (isSet) throw new InvalidInput("a set has no value: proclaim on one resource");
        const renewed = await call(
          t,
          request("renew", { resource: resources[0], token: held?.token, ttlSeconds: ttl, value }),
          { deadline: kept.clock.deadline },
        );
        if (!renewed.granted) {
          const rule = renewed.rules[0] ?? "refused";
          kept.lose(rule);
          throw new LeaseLost(`proclaim refused (${rule}): no longer the leader`, rule);
        }
        return renewed;
      };
      const finish = (fields: Record<string, unknown>) => kept.end(fields);
      const isCurrent = () =>
        call(t, body({ op: "check", tenantId: tenant, resource: resources[0], token: held?.token, holder }));
      held = new HeldLease({
        resources,
        holder,
        ttl,
        limit,
        answer,
        clock: kept.clock,
        signal: kept.signal,
        now: t.now,
        proclaim,
        finish,
        isCurrent,
      });
      return fn(held);
    },
  );
}

/** What `keep` gives the function it runs: the clock of what is kept, and its loss. */
export interface Kept {
  readonly clock: Clock;
  /** Aborted, with a `LeaseLost` as its reason, once it may be someone else's. */
  readonly signal: AbortSignal;
  /** Record a loss learned by another call than a renewal: the signal fires at once. */
  readonly lose: (rule: string) => void;
  /**
   * End it now with the ending and `fields` (a done release's), once: renewals stop, and the
   * function's return ends nothing more. `LeaseLost` when it was lost first, or the ending was
   * refused.
   */
  readonly end: (fields: Record<string, unknown>) => Promise<Lease>;
}

/**
 * Keep what a grant sent at `sent` gave (a lease, a set, a session) while `fn` runs: renewed in
 * the background by `renewal()` on the local-deadline rule (see `Clock`), the loss signalled at
 * the local deadline itself whatever a renewal in flight is doing, and ended by `ending()` when
 * `fn` returns or throws, unless the service refused a renewal (it ended it already). After a
 * loss to silence it is ended all the same, given `ENDING_GRACE_MS`: a renewal whose answer
 * never came may have been applied and kept it another TTL (the attack of 2026-12-05); ending
 * what is no longer ours is refused and changes nothing. It lapses by itself if the ending fails.
 */
export async function keep<T>(
  t: Transport,
  ttl: number,
  sent: number,
  requests: { renewal: () => Record<string, unknown>; ending: () => Record<string, unknown> },
  fn: (kept: Kept) => Promise<T> | T,
): Promise<T> {
  const clock = new Clock(ttl);
  clock.granted(sent);
  const lost = new AbortController();
  const stopping = new AbortController();
  const lose = () => {
    if (!lost.signal.aborted) lost.abort(new LeaseLost(clock.lostReason ?? "lost", clock.lostRule));
  };
  // The loss is signalled at the local deadline itself, whatever a renewal in flight is doing.
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => (clock.judge(t.now()) ? lose() : arm()), Math.max(0, clock.deadline - t.now()));
  };
  arm();
  const renewing = renew(t, clock, stopping.signal, lose, arm, requests.renewal);
  const refused = (rule: string) => {
    clock.refused(rule);
    lose();
  };
  let ended = false;
  const end = async (fields: Record<string, unknown>): Promise<Lease> => {
    if (ended) throw new LeaseLost("ended already", null);
    stopping.abort();
    await renewing;
    if (clock.judge(t.now())) {
      lose();
      throw new LeaseLost(`not finished: ${clock.lostReason ?? "lost"}`, clock.lostRule);
    }
    ended = true;
    // Refused with nothing changed (bad input, or a rule: finished by another holder meanwhile),
    // the permit is released plainly, not left held for its whole TTL (the attack of 2026-12-06).
    const plainly = () => call(t, requests.ending(), { deadline: clock.deadline }).catch(() => undefined);
    let answer: Lease;
    try {
      answer = await call(t, body({ ...requests.ending(), ...fields }), { deadline: clock.deadline });
    } catch (error) {
      if (error instanceof InvalidInput) await plainly();
      throw error;
    }
    if (!answer.granted) {
      await plainly();
      refused(answer.rules[0] ?? "refused");
      throw new LeaseLost(`not finished (${answer.rules[0] ?? "refused"})`, clock.lostRule);
    }
    return answer;
  };
  try {
    return await fn({ clock, signal: lost.signal, lose: refused, end });
  } finally {
    stopping.abort();
    await renewing;
    clearTimeout(timer);
    if (clock.lostRule === null && !ended) {
      const deadline = Math.max(clock.deadline, t.now() + ENDING_GRACE_MS);
      await call(t, requests.ending(), { deadline }).catch(() => undefined);
    }
  }
}

function leasesOf(held: HeldLease): { resource: string; token: number }[] {
  return held.resources.map((resource) => ({ resource, token: held.tokens[resource] ?? 0 }));
}

/** Sleep `ms`, or less if `signal` aborts; whether it aborted. */
export function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve(signal.aborted);
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * Renew a third of the way to the local deadline until `stop` aborts. A granted renewal moves
 * the deadline (unless a loss was judged meanwhile: that is final); a refused one is a loss with
 * its rule; a failed one is tried again `RETRY_PAUSE_MS` later while time is left. A grant that
 * lands at or past the deadline comes too late: the loss stands.
 */
async function renew(
  t: Transport,
  clock: Clock,
  stop: AbortSignal,
  lose: () => void,
  rearm: () => void,
  request: () => Record<string, unknown>,
): Promise<void> {
  let wait = clock.nextRenewal() - t.now();
  for (;;) {
    if (await pause(wait, stop)) return;
    const sent = t.now();
    if (clock.judge(sent)) return lose();
    let answer: Lease;
    try {
      answer = await call(t, request(), { deadline: clock.deadline, signal: stop });
    } catch {
      if (stop.aborted) return;
      wait = RETRY_PAUSE_MS;
      continue;
    }
    if (!answer.granted) {
      clock.refused(answer.rules[0] ?? "refused");
      return lose();
    }
    if (clock.judge(t.now())) return lose();
    clock.granted(sent);
    rearm();
    wait = clock.nextRenewal() - t.now();
  }
}
