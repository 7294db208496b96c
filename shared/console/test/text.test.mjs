// The console's sentences. Run: node --test shared/console/test/
import { test } from "node:test";
import assert from "node:assert/strict";

import { ApiError } from "../protocol.js";
import {
  describe,
  finishedText,
  limitText,
  noEntriesText,
  noLeasesText,
  nothingRevokedText,
  revokedText,
} from "../text.js";

test("describe: 401 asks for a valid key, whatever was being done", () => {
  const sentence = "The API key was refused (401 UNAUTHORIZED): sign in with a valid key.";
  assert.equal(describe(new ApiError(401, "UNAUTHORIZED", "bad key")), sentence);
  assert.equal(describe(new ApiError(401, "", ""), "Could not list leases"), sentence);
});

test("describe: 403 says the key has no admin role, and for what", () => {
  assert.equal(describe(new ApiError(403, "FORBIDDEN", "x")), "Forbidden: this key has no admin role.");
  assert.equal(
    describe(new ApiError(403, "FORBIDDEN", "x"), "Could not read the audit"),
    "Forbidden: this key has no admin role (Could not read the audit).",
  );
});

test("describe: no answer at all (status 0) gives the message and a full stop", () => {
  const err = new ApiError(0, "NETWORK", "could not reach the server");
  assert.equal(describe(err), "could not reach the server.");
  assert.equal(describe(err, "Could not list leases"), "Could not list leases: could not reach the server.");
});

test("describe: any other status gives the message, the status and the code", () => {
  assert.equal(
    describe(new ApiError(409, "CONFLICT", "lease is busy"), "Revoke failed"),
    "Revoke failed: lease is busy (409 CONFLICT)",
  );
  assert.equal(describe(new ApiError(502, "", "the server answered 502")), "the server answered 502 (502)");
  assert.equal(describe(new ApiError(500)), "request failed (500)");
});

test("describe: hostile server text stays as it came", () => {
  const text = "<script>window.__pwned=3</script> \u202e";
  assert.equal(describe(new ApiError(400, "INVALID", text), "Revoke failed"), "Revoke failed: " + text + " (400 INVALID)");
});

test("noLeasesText: says the prefix and the page when they narrow it", () => {
  assert.equal(noLeasesText("", 1), "No live leases.");
  assert.equal(noLeasesText(null, 1), "No live leases.");
  assert.equal(noLeasesText("deploy:", 1), "No live leases whose name starts with \u201cdeploy:\u201d.");
  assert.equal(noLeasesText("", 2), "No live leases on this page.");
  assert.equal(noLeasesText("jobs/", 3), "No live leases whose name starts with \u201cjobs/\u201d on this page.");
});

test("noEntriesText: the first page has no revokes yet, a later one no more entries", () => {
  assert.equal(noEntriesText(1), "No revokes yet.");
  assert.equal(noEntriesText(2), "No more entries.");
  assert.equal(noEntriesText(40), "No more entries.");
});

test("limitText: a lock's limit alone, a semaphore's with how many hold it", () => {
  assert.equal(limitText(1, 1), "limit 1");
  assert.equal(limitText(1, 0), "limit 1");
  assert.equal(limitText(3, 2), "limit 3 \u00b7 2 held");
  assert.equal(limitText(2, 0), "limit 2 \u00b7 0 held");
});

test("nothingRevokedText: the witnesses' details, when there are any", () => {
  assert.equal(nothingRevokedText(undefined), "Nothing was revoked.");
  assert.equal(nothingRevokedText([]), "Nothing was revoked.");
  assert.equal(nothingRevokedText("not a list"), "Nothing was revoked.");
  assert.equal(
    nothingRevokedText([{ detail: "no live permit of w" }, { detail: "token 3 is not current" }]),
    "Nothing was revoked: no live permit of w; token 3 is not current.",
  );
  assert.equal(
    nothingRevokedText([null, { detail: "" }, { detail: 5 }, {}, { detail: "gone" }]),
    "Nothing was revoked: gone.",
    "empty, missing and non-text details are left out",
  );
});

test("revokedText: the resource and each ended permit", () => {
  assert.equal(revokedText("deploy:prod", [{ holder: "w", fencingToken: 7 }]), "Revoked on deploy:prod: w #7.");
  assert.equal(
    revokedText("jobs", [
      { holder: "a", fencingToken: 1 },
      { holder: "b", fencingToken: 2 },
    ]),
    "Revoked on jobs: a #1, b #2.",
  );
  const hostile = '<img src=x onerror="window.__pwned=1">';
  assert.equal(revokedText("r", [{ holder: hostile, fencingToken: 3 }]), "Revoked on r: " + hostile + " #3.");
  assert.equal(revokedText("r", [{}]), "Revoked on r: undefined #undefined.");
});

test("finishedText: who finished it, with which token, and its result when there is one", () => {
  assert.equal(
    finishedText({ holder: "w1", fencingToken: 3, result: "sent INV-1009" }),
    "Finished by w1 (token 3): sent INV-1009",
  );
  assert.equal(finishedText({ holder: "w1", fencingToken: 3, result: null }), "Finished by w1 (token 3)");
  assert.equal(finishedText({ holder: "w1", fencingToken: 3, result: "" }), "Finished by w1 (token 3)");
});
