// The lease API as the console speaks it: what it accepts from the form, the requests it sends,
// how it reads the answers. No DOM and no network here: console.js does the fetch.

export const PAGE_SIZE = 25;
const KEY_RE = /^[\x20-\x7e]{16,256}$/;
const TENANT_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const PREFIX_RE = /^[A-Za-z0-9_.:/@+-]{0,200}$/;

// An API key: 16 to 256 printable ASCII characters.
export function validKey(key) {
  return typeof key === "string" && KEY_RE.test(key);
}

// A tenant: 1 to 64 letters, digits, '_', '.' or '-'.
export function validTenant(tenant) {
  return typeof tenant === "string" && TENANT_RE.test(tenant);
}

// A list prefix: up to 200 letters, digits or _ . : / @ + - (none at all lists everything).
export function validPrefix(prefix) {
  return typeof prefix === "string" && PREFIX_RE.test(prefix);
}

// A revoke's reason (already trimmed): 1 to 200 characters, counted as code points, as the
// server counts them.
export function validReason(reason) {
  const length = Array.from(reason).length;
  return length >= 1 && length <= 200;
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || "request failed");
    this.status = status;
    this.code = code || "";
  }
}

// The answer's payload (parsed JSON, or null if it was not JSON) when it is a success with data;
// else throws the ApiError that says what went wrong.
export function checkAnswer(status, ok, payload) {
  if (!ok) {
    const error = payload && typeof payload.error === "string" ? payload.error : "";
    const code = payload && typeof payload.code === "string" ? payload.code : "";
    throw new ApiError(status, code, error || "the server answered " + status);
  }
  if (!payload || typeof payload.data !== "object" || payload.data === null) {
    throw new ApiError(status, "BAD_ANSWER", "the answer had no data");
  }
  return payload;
}

// When the server signed the answer (ms since the epoch), or NaN if the answer does not say.
export function signedAt(payload) {
  const proof = payload && payload._provenance && payload._provenance.credential;
  const at = proof && (proof.validFrom || (proof.proof && proof.proof.created));
  return typeof at === "string" ? Date.parse(at) : NaN;
}

// The cursor of the next page, or null on the last one.
export function nextCursor(data) {
  return typeof data.nextCursor === "string" && data.nextCursor ? data.nextCursor : null;
}

// A listed lease's permits: a semaphore lists its holders, a lock its one holder.
// A list entry's finished mark ({holder, fencingToken, doneAt, result, until}), or null.
export function doneOf(lease) {
  const done = lease && lease.done;
  return done && typeof done === "object" && typeof done.holder === "string" ? done : null;
}

export function holdersOf(lease) {
  if (Array.isArray(lease.holders)) return lease.holders;
  if (lease.granted && typeof lease.holder === "string") {
    return [{ holder: lease.holder, fencingToken: lease.fencingToken, expiresAt: lease.expiresAt }];
  }
  return [];
}

// How many permits a lease has (1, a lock, unless it says otherwise).
export function limitOf(lease) {
  return Number.isInteger(lease.limit) ? lease.limit : 1;
}

export function listRequest(prefix, cursor) {
  const body = { op: "list", pageSize: PAGE_SIZE };
  if (prefix) body.prefix = prefix;
  if (cursor) body.cursor = cursor;
  return body;
}

export function auditRequest(cursor) {
  const body = { op: "audit", pageSize: PAGE_SIZE };
  if (cursor) body.cursor = cursor;
  return body;
}

// The revoke of `target` ({resource, holder|null, token|null, session?}): every permit of the
// resource, or one holder's, or (with a session) that session and every permit in it. The permit
// on screen, by its token: a newer permit of the same holder is left alone.
export function revokeRequest(target, reason) {
  // A finished resource's mark, ended early by an admin (docs/adr/0012): audited as a revoke is.
  if (target.reopen) return { op: "reopen", resource: target.resource, reason };
  if (target.session) return { op: "revoke", session: target.session, reason };
  const body = { op: "revoke", resource: target.resource, reason };
  if (target.holder !== null) body.holder = target.holder;
  if (target.token !== null) body.token = target.token;
  return body;
}
