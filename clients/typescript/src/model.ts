// What the service answers, as types, read defensively from its JSON; and request bodies.

import { ServiceError } from "./errors.js";

/** One live permit of a resource: its holder, fencing token and expiry, and its session (or null). */
export interface Permit {
  readonly holder: string;
  readonly token: number;
  readonly expiresAt: Date;
  readonly session: string | null;
  /** Its holder's note (a leader's address, progress), or null. */
  readonly value: string | null;
}

/** Who leads a resource (holds its one permit): holder, fencing token, value and expiry. */
export interface Leader {
  readonly holder: string;
  readonly token: number;
  readonly value: string | null;
  readonly expiresAt: Date | null;
}

/** A live session: it and every permit in it (`leases`) lapse at `expiresAt` unless kept alive. */
export interface SessionState {
  readonly id: string;
  readonly holder: string;
  readonly expiresAt: Date;
  readonly leases: readonly { readonly resource: string; readonly token: number; readonly limit: number }[];
}

/**
 * A finished resource's mark (a done release): who finished it, with which token, when, what
 * the work produced, and until when nobody is granted it (unless it is reopened).
 */
export interface Done {
  readonly holder: string;
  readonly token: number;
  readonly doneAt: Date;
  readonly result: string | null;
  readonly until: Date;
}

/** A live place in a resource's queue: its holder, and when it lapses unless they call again. */
export interface Waiter {
  readonly holder: string;
  readonly until: Date;
}

/**
 * One resource of a set as it stands after the call, or of a list page (`holder`, `token`,
 * `expiresAt`: your permit when you have one, else the live one with the largest token;
 * `waiters`: a list page's live places in its queue, in order).
 */
export interface Member {
  readonly resource: string;
  readonly granted: boolean;
  readonly token: number | null;
  readonly holder: string | null;
  readonly expiresAt: Date | null;
  readonly limit: number;
  readonly holders: readonly Permit[];
  readonly waiters: readonly Waiter[];
  /** Its finished mark, if it is finished. */
  readonly done: Done | null;
}

/** One revoke, as the audit keeps it (90 days). */
export interface AuditEntry {
  readonly id: string;
  readonly at: Date;
  /** `key:<key id>`, or the paying wallet's tenant. */
  readonly actor: string;
  /** The resource revoked; null for a session's revoke. */
  readonly resource: string | null;
  /** The session revoked, with every permit in it; null for a resource's revoke. */
  readonly session: string | null;
  readonly ended: readonly Permit[];
  readonly reason: string;
  /** A reopen's entry: the finished mark it ended. */
  readonly reopened: Done | null;
}

/**
 * A page of `list` (`leases`: live resources by name) or `audit` (`entries`: newest first);
 * `nextCursor` continues it (null at the end). A list is advisory: a grant shows within about
 * 2 s; `get` and `check` decide.
 */
export interface Page {
  readonly leases: readonly Member[];
  readonly entries: readonly AuditEntry[];
  readonly nextCursor: string | null;
}

/**
 * A lease as the service answered it.
 *
 * `granted`: acquire/renew: you hold it now; release: it was released; get: someone holds it;
 * check: the token is current; a set: every resource of it. `token`, `holder`, `expiresAt`:
 * your permit when you have one after the call, else the live permit with the largest token
 * (null when free, and for a set: see `leases`). `rules`: why the call did not do what was
 * asked (LEASE_HELD, TOKEN_MISMATCH, ...), else empty. `replayed`: the stored answer of an
 * earlier call with the same request id. `queuePosition`: an acquire whose wait ended
 * ungranted: your place (1 = next). `session`: open, keepalive, close and get of a session: the
 * session after the call (null once it has ended, or when unknown). `value`: the shown
 * permit's note. `stateTag`: the resource's state after the call (an answer about one
 * resource), for `watch`; `changed`: a watch's answer, whether the state is another than the
 * tag sent named. `done`: the resource's finished mark (null when it is not finished);
 * `resource`: an acquire of candidates' winner. `raw`: the answer as sent, `_provenance` included (a signed credential any
 * third party can verify).
 */
export interface Lease {
  readonly granted: boolean;
  readonly token: number | null;
  readonly holder: string | null;
  readonly expiresAt: Date | null;
  readonly rules: readonly string[];
  readonly replayed: boolean;
  readonly limit: number;
  readonly holders: readonly Permit[];
  readonly current: boolean | null;
  readonly leases: readonly Member[] | null;
  readonly queuePosition: number | null;
  readonly revoked: readonly Permit[] | null;
  readonly entries: readonly AuditEntry[] | null;
  readonly nextCursor: string | null;
  readonly session: SessionState | null;
  readonly value: string | null;
  readonly stateTag: string | null;
  readonly changed: boolean | null;
  readonly done: Done | null;
  readonly resource: string | null;
  readonly raw: unknown;
}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);
const int = (value: unknown): number | null => (Number.isSafeInteger(value) ? (value as number) : null);
const str = (value: unknown): string | null => (typeof value === "string" ? value : null);
const time = (value: unknown): Date | null => (typeof value === "string" ? new Date(value) : null);
const objects = (value: unknown): Json[] => (Array.isArray(value) ? value.filter(isObject) : []);

function permits(value: unknown): Permit[] {
  return objects(value).map((p) => ({
    holder: String(p.holder),
    token: int(p.fencingToken) ?? 0,
    expiresAt: time(p.expiresAt) ?? new Date(0),
    session: str(p.session),
    value: str(p.value),
  }));
}

function sessionOf(value: unknown): SessionState | null {
  if (!isObject(value)) return null;
  return {
    id: String(value.id),
    holder: String(value.holder),
    expiresAt: time(value.expiresAt) ?? new Date(0),
    leases: objects(value.leases).map((p) => ({
      resource: String(p.resource),
      token: int(p.fencingToken) ?? 0,
      limit: int(p.limit) ?? 1,
    })),
  };
}

function doneOf(value: unknown): Done | null {
  if (!isObject(value)) return null;
  return {
    holder: String(value.holder),
    token: int(value.fencingToken) ?? 0,
    doneAt: time(value.doneAt) ?? new Date(0),
    result: str(value.result),
    until: time(value.until) ?? new Date(0),
  };
}

function waiters(value: unknown): Waiter[] {
  return objects(value).map((w) => ({ holder: String(w.holder), until: time(w.until) ?? new Date(0) }));
}

function members(value: unknown): Member[] | null {
  if (!Array.isArray(value)) return null;
  return objects(value).map((m) => ({
    resource: String(m.resource),
    granted: m.granted === true,
    token: int(m.fencingToken),
    holder: str(m.holder),
    expiresAt: time(m.expiresAt),
    limit: int(m.limit) ?? 1,
    holders: permits(m.holders),
    waiters: waiters(m.waiters),
    done: doneOf(m.done),
  }));
}

function entries(value: unknown): AuditEntry[] | null {
  if (!Array.isArray(value)) return null;
  return objects(value).map((e) => ({
    id: String(e.id),
    at: time(e.at) ?? new Date(0),
    actor: String(e.actor),
    resource: e.resource == null ? null : String(e.resource),
    session: e.session == null ? null : String(e.session),
    ended: permits(e.ended),
    reason: String(e.reason),
    reopened: doneOf(e.reopened),
  }));
}

/** The lease a 200 answer carries; a body of another shape is the service's error. */
export function leaseFrom(answer: unknown): Lease {
  const data = isObject(answer) ? answer.data : undefined;
  // A page (list, audit) is about no one resource: it has no `granted` and no permit fields.
  const page = isObject(data) && (data.op === "list" || data.op === "audit");
  if (!isObject(data) || (!page && typeof data.granted !== "boolean")) {
    throw new ServiceError("the service's answer is not a lease answer", { status: 200 });
  }
  return {
    granted: data.granted === true,
    token: int(data.fencingToken),
    holder: str(data.holder),
    expiresAt: time(data.expiresAt),
    rules: objects(data.witnesses).map((w) => String(w.ruleId)),
    replayed: data.replayed === true,
    limit: int(data.limit) ?? 1,
    holders: permits(data.holders),
    current: typeof data.current === "boolean" ? data.current : null,
    leases: members(data.leases),
    queuePosition: int(data.queuePosition),
    revoked: Array.isArray(data.revoked) ? permits(data.revoked) : null,
    entries: entries(data.entries),
    nextCursor: str(data.nextCursor),
    session: sessionOf(data.session),
    value: str(data.value),
    stateTag: str(data.stateTag),
    changed: typeof data.changed === "boolean" ? data.changed : null,
    done: doneOf(data.done),
    resource: str(data.resource),
    raw: answer,
  };
}

/** The leader a get or watch answer shows; null when nobody holds the resource. */
export function leaderOf(lease: Lease): Leader | null {
  if (lease.holder === null || lease.token === null) return null;
  return { holder: lease.holder, token: lease.token, value: lease.value, expiresAt: lease.expiresAt };
}

/** A lease answer as a list or audit page. */
export function pageOf(lease: Lease): Page {
  return { leases: lease.leases ?? [], entries: lease.entries ?? [], nextCursor: lease.nextCursor };
}

/** A request id for one mutation, kept across that mutation's own retries. */
export function newRequestId(): string {
  return `ts-${globalThis.crypto.randomUUID().replaceAll("-", "")}`;
}

/** A lease request body: the fields that are set (undefined ones are left out). */
export function body(fields: Record<string, unknown>): Json {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}
