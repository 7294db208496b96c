// The lease API as the console speaks it: input checks, requests, answers.
// Run: node --test shared/console/test/
import { test } from "node:test";
import assert from "node:assert/strict";

import {
  ApiError,
  PAGE_SIZE,
  auditRequest,
  checkAnswer,
  doneOf,
  holdersOf,
  limitOf,
  listRequest,
  nextCursor,
  revokeRequest,
  signedAt,
  validKey,
  validPrefix,
  validReason,
  validTenant,
} from "../protocol.js";

const NOT_STRINGS = [null, undefined, 1234567890123456, {}, [], true];

test("validKey: 16 to 256 printable ASCII characters", () => {
  assert.equal(validKey("a".repeat(16)), true);
  assert.equal(validKey("a".repeat(256)), true);
  assert.equal(validKey("interop-key 0123456789 ~!@#$%^&*()"), true, "spaces and punctuation");
  assert.equal(validKey("a".repeat(15)), false);
  assert.equal(validKey("a".repeat(257)), false);
  assert.equal(validKey(""), false);
  for (const bad of ["\t", "\n", "\x7f", "é", "\u202e", "\u0000"]) {
    assert.equal(validKey("0123456789abcdef" + bad), false, JSON.stringify(bad));
  }
  for (const value of NOT_STRINGS) assert.equal(validKey(value), false, String(value));
});

test("validTenant: 1 to 64 letters, digits, _ . -", () => {
  for (const ok of ["a", "acme", "acme-ops", "A_b.c-9", "t".repeat(64)]) assert.equal(validTenant(ok), true, ok);
  for (const bad of ["", "t".repeat(65), "acme ops", "acme/ops", "acme:ops", "ácme", "acme\n", "<b>"]) {
    assert.equal(validTenant(bad), false, JSON.stringify(bad));
  }
  // "null" would be a valid tenant name: a missing value must not become it.
  for (const value of NOT_STRINGS) assert.equal(validTenant(value), false, String(value));
});

test("validPrefix: none at all, or up to 200 of letters, digits and _ . : / @ + -", () => {
  for (const ok of ["", "deploy:", "a/b@c+d-e_f.g:h", "p".repeat(200)]) assert.equal(validPrefix(ok), true, ok);
  for (const bad of ["p".repeat(201), "deploy prod", "<script>", "a\u202e", "a*", "a%", "é"]) {
    assert.equal(validPrefix(bad), false, JSON.stringify(bad));
  }
  for (const value of NOT_STRINGS) assert.equal(validPrefix(value), false, String(value));
});

test("validReason: 1 to 200 characters, counted as code points", () => {
  assert.equal(validReason("x"), true);
  assert.equal(validReason("r".repeat(200)), true);
  assert.equal(validReason(""), false);
  assert.equal(validReason("r".repeat(201)), false);
  // 200 emoji are 400 UTF-16 units: still 200 characters.
  assert.equal(validReason("🔥".repeat(200)), true);
  assert.equal(validReason("🔥".repeat(201)), false);
  assert.equal(validReason("<b>wedged</b> worker <script>window.__pwned=2</script>"), true);
});

test("ApiError: an Error with a status, a code ('' if none) and a message", () => {
  const err = new ApiError(409, "CONFLICT", "lease is busy");
  assert.ok(err instanceof Error);
  assert.deepEqual([err.status, err.code, err.message], [409, "CONFLICT", "lease is busy"]);
  const bare = new ApiError(500);
  assert.deepEqual([bare.status, bare.code, bare.message], [500, "", "request failed"]);
});

function refusal(fn) {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ApiError, "an ApiError");
    return { status: err.status, code: err.code, message: err.message };
  }
  assert.fail("did not throw");
}

test("checkAnswer: a success with data is the payload itself", () => {
  const payload = { data: { leases: [] }, _provenance: {} };
  assert.equal(checkAnswer(200, true, payload), payload);
  const list = { data: [] };
  assert.equal(checkAnswer(200, true, list), list, "an array is data too");
});

test("checkAnswer: a success without data is a BAD_ANSWER", () => {
  const bad = { status: 200, code: "BAD_ANSWER", message: "the answer had no data" };
  for (const payload of [null, {}, { data: null }, { data: "ok" }, { data: 1 }, { error: "x" }]) {
    assert.deepEqual(refusal(() => checkAnswer(200, true, payload)), bad, JSON.stringify(payload));
  }
});

test("checkAnswer: a refusal carries the server's error and code", () => {
  assert.deepEqual(
    refusal(() => checkAnswer(403, false, { error: "this key has no admin role", code: "FORBIDDEN" })),
    { status: 403, code: "FORBIDDEN", message: "this key has no admin role" },
  );
  assert.deepEqual(
    refusal(() => checkAnswer(409, false, { error: "busy", code: "CONFLICT", data: { granted: false } })),
    { status: 409, code: "CONFLICT", message: "busy" },
    "not ok wins over data",
  );
});

test("checkAnswer: a refusal without a usable error says the status", () => {
  const plain = { status: 502, code: "", message: "the server answered 502" };
  for (const payload of [null, {}, { error: "" }, { error: { text: "x" } }, { error: 7, code: 9 }, "Bad Gateway"]) {
    assert.deepEqual(refusal(() => checkAnswer(502, false, payload)), plain, JSON.stringify(payload));
  }
  assert.deepEqual(refusal(() => checkAnswer(500, false, { code: "INTERNAL" })), {
    status: 500,
    code: "INTERNAL",
    message: "the server answered 500",
  });
});

test("checkAnswer: hostile error text is kept as text", () => {
  const error = '<img src=x onerror="window.__pwned=1"> \u202e';
  assert.equal(refusal(() => checkAnswer(400, false, { error, code: "INVALID" })).message, error);
});

test("signedAt: the credential's validFrom, else its proof's created time", () => {
  const at = "2026-12-03T10:00:00Z";
  const ms = Date.parse(at);
  assert.equal(signedAt({ _provenance: { credential: { validFrom: at } } }), ms);
  assert.equal(signedAt({ _provenance: { credential: { proof: { created: at } } } }), ms);
  assert.equal(
    signedAt({ _provenance: { credential: { validFrom: at, proof: { created: "2020-01-01T00:00:00Z" } } } }),
    ms,
    "validFrom first",
  );
});

test("signedAt: NaN when the answer does not say", () => {
  for (const payload of [
    null,
    undefined,
    {},
    { data: {} },
    { _provenance: null },
    { _provenance: {} },
    { _provenance: { credential: {} } },
    { _provenance: { credential: { proof: {} } } },
    { _provenance: { credential: { validFrom: 1_800_000_000_000 } } },
    { _provenance: { credential: { validFrom: ["2026-12-03T10:00:00Z"] } } }, // a string only
    { _provenance: { credential: { proof: { created: new Date(0) } } } },
    { _provenance: { credential: { validFrom: "yesterday" } } },
    { _provenance: { credential: { validFrom: "", proof: { created: "" } } } },
  ]) {
    assert.ok(Number.isNaN(signedAt(payload)), JSON.stringify(payload));
  }
});

test("nextCursor: a non-empty string, else null", () => {
  assert.equal(nextCursor({ nextCursor: "abc" }), "abc");
  for (const data of [{}, { nextCursor: "" }, { nextCursor: null }, { nextCursor: 5 }, { nextCursor: ["a"] }]) {
    assert.equal(nextCursor(data), null, JSON.stringify(data));
  }
});

test("holdersOf: a semaphore's holders, a lock's one holder, or none", () => {
  const holders = [{ holder: "a", fencingToken: 1, expiresAt: "2026-12-03T10:00:00Z" }];
  assert.equal(holdersOf({ holders }), holders);
  assert.deepEqual(holdersOf({ holders: [], granted: true, holder: "x" }), [], "holders first, even empty");
  assert.deepEqual(
    holdersOf({ granted: true, holder: "w", fencingToken: 7, expiresAt: "2026-12-03T10:00:00Z", resource: "r" }),
    [{ holder: "w", fencingToken: 7, expiresAt: "2026-12-03T10:00:00Z" }],
  );
  assert.deepEqual(holdersOf({ granted: true, holder: "w" }), [
    { holder: "w", fencingToken: undefined, expiresAt: undefined },
  ]);
  for (const lease of [{}, { granted: false, holder: "w" }, { granted: true }, { granted: true, holder: 5 }, { holders: "a" }]) {
    assert.deepEqual(holdersOf(lease), [], JSON.stringify(lease));
  }
});

test("limitOf: the lease's integer limit, else 1", () => {
  assert.equal(limitOf({ limit: 3 }), 3);
  assert.equal(limitOf({ limit: 64 }), 64);
  for (const lease of [{}, { limit: null }, { limit: "3" }, { limit: 2.5 }, { limit: NaN }]) {
    assert.equal(limitOf(lease), 1, JSON.stringify(lease));
  }
});

test("listRequest: a page of 25, with the prefix and cursor only when given", () => {
  assert.equal(PAGE_SIZE, 25);
  assert.deepEqual(listRequest("", null), { op: "list", pageSize: 25 });
  assert.deepEqual(listRequest(undefined, undefined), { op: "list", pageSize: 25 });
  assert.deepEqual(listRequest("deploy:", null), { op: "list", pageSize: 25, prefix: "deploy:" });
  assert.equal(
    JSON.stringify(listRequest("deploy:", "c1")),
    '{"op":"list","pageSize":25,"prefix":"deploy:","cursor":"c1"}',
  );
});

test("auditRequest: a page of 25, with the cursor only when given", () => {
  assert.deepEqual(auditRequest(null), { op: "audit", pageSize: 25 });
  assert.deepEqual(auditRequest(""), { op: "audit", pageSize: 25 });
  assert.equal(JSON.stringify(auditRequest("c2")), '{"op":"audit","pageSize":25,"cursor":"c2"}');
});

test("revokeRequest: a session, and every permit in it, by its id alone", () => {
  assert.equal(
    JSON.stringify(revokeRequest({ resource: "r", holder: "w", token: null, session: "k7f3q2m5x4w4c2b6n2p5r7t3ya", count: 1 }, "stuck")),
    '{"op":"revoke","session":"k7f3q2m5x4w4c2b6n2p5r7t3ya","reason":"stuck"}',
  );
});

test("revokeRequest: every permit of a resource, or one holder's permit by its token", () => {
  assert.deepEqual(revokeRequest({ resource: "r", holder: null, token: null, count: 2 }, "why"), {
    op: "revoke",
    resource: "r",
    reason: "why",
  });
  assert.equal(
    JSON.stringify(revokeRequest({ resource: "r", holder: "w", token: 12, count: 1 }, "stuck")),
    '{"op":"revoke","resource":"r","reason":"stuck","holder":"w","token":12}',
  );
  // Only null means "none": an empty holder and token 0 are sent.
  assert.deepEqual(revokeRequest({ resource: "r", holder: "", token: 0 }, "x"), {
    op: "revoke",
    resource: "r",
    reason: "x",
    holder: "",
    token: 0,
  });
  const hostile = '<img src=x onerror="window.__pwned=1"> \u202e';
  assert.deepEqual(revokeRequest({ resource: hostile, holder: hostile, token: 1 }, hostile), {
    op: "revoke",
    resource: hostile,
    reason: hostile,
    holder: hostile,
    token: 1,
  });
});

test("revokeRequest: a reopen names the resource and the reason only (an admin's)", () => {
  assert.deepEqual(revokeRequest({ resource: "task:1", reopen: true, done: { holder: "w1" } }, "redo"), {
    op: "reopen",
    resource: "task:1",
    reason: "redo",
  });
});

test("doneOf: a list entry's finished mark, or null for anything else", () => {
  const done = { holder: "w1", fencingToken: 3, doneAt: "2026-12-06T00:00:00.000Z", result: "ok", until: "x" };
  assert.equal(doneOf({ done }), done);
  for (const lease of [{}, { done: null }, { done: "w1" }, { done: { holder: 1 } }, null]) {
    assert.equal(doneOf(lease), null);
  }
});
