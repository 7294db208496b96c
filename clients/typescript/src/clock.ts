// The rule a held lease keeps time by: the same as the Rust guard's and the Python client's,
// checked against the shared table of cases (clients/deadlines.json).

/**
 * The part of a lease a held lease does not count on: 1% of the TTL plus 250 ms (in ms).
 *
 * The local deadline is the send time of the last granted acquire or renew plus the TTL minus
 * this margin, on this process's monotonic clock (`performance.now()`): the server started its
 * TTL later than the send, so the offsets of the two clocks cancel; the margin covers their
 * rates (1%, ten times the worst NTP slew plus quartz drift) and a loaded host's late timers.
 */
export function safetyMarginMs(ttlSeconds: number): number {
  return ttlSeconds * 10 + 250;
}

/** A held lease's time: its local deadline, and whether (and why) it was lost. */
export class Clock {
  readonly ttlSeconds: number;
  deadline = -Infinity;
  lostRule: string | null = null;
  lostReason: string | null = null;

  constructor(ttlSeconds: number) {
    this.ttlSeconds = ttlSeconds;
  }

  /** How long a grant is counted on (ms). */
  get usable(): number {
    return this.ttlSeconds * 1000 - safetyMarginMs(this.ttlSeconds);
  }

  /** An acquire or renewal sent at `sent` was granted (a loss already judged stays final). */
  granted(sent: number): void {
    if (this.lostReason === null) this.deadline = Math.max(this.deadline, sent + this.usable);
  }

  /** When to renew: a third of the way to the deadline, two thirds left for retries. */
  nextRenewal(): number {
    return this.deadline - this.usable + this.usable / 3;
  }

  /** Record the loss if the deadline has passed; whether the lease is lost. */
  judge(now: number): boolean {
    if (this.lostReason === null && now >= this.deadline) {
      this.lostReason = "no renewal got through before the local deadline";
    }
    return this.lostReason !== null;
  }

  refused(rule: string): void {
    if (this.lostReason === null) {
      this.lostRule = rule;
      this.lostReason = `a renewal was refused (${rule})`;
    }
  }
}
