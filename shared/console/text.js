// The console's sentences, from values. No DOM here: console.js shows them as text.

// A sentence for an error, for the status line.
export function describe(err, what) {
  if (err.status === 401) {
    return "The API key was refused (401 UNAUTHORIZED): sign in with a valid key.";
  }
  if (err.status === 403) {
    return "Forbidden: this key has no admin role" + (what ? " (" + what + ")" : "") + ".";
  }
  if (err.status === 0) {
    return (what ? what + ": " : "") + err.message + ".";
  }
  const code = err.code ? " " + err.code : "";
  return (what ? what + ": " : "") + err.message + " (" + err.status + code + ")";
}

// What an empty lease list says, under a prefix (or none) on page `page` (1 is the first).
export function noLeasesText(prefix, page) {
  let text = "No live leases";
  if (prefix) text += " whose name starts with \u201c" + prefix + "\u201d";
  if (page > 1) text += " on this page";
  return text + ".";
}

// What an empty audit page says.
export function noEntriesText(page) {
  return page > 1 ? "No more entries." : "No revokes yet.";
}

// A lease card's "limit 3 · 2 held" (a lock's is "limit 1").
export function limitText(limit, held) {
  return "limit " + limit + (limit > 1 ? " \u00b7 " + held + " held" : "");
}

// Why a revoke ended nothing: the details of the answer's witnesses, if any.
export function nothingRevokedText(witnesses) {
  const detail = (Array.isArray(witnesses) ? witnesses : [])
    .map((w) => (w && typeof w.detail === "string" ? w.detail : ""))
    .filter(Boolean)
    .join("; ");
  return "Nothing was revoked" + (detail ? ": " + detail : "") + ".";
}

// A finished resource's line: "Finished by w1 (token 3): sent INV-1009" (no result: no colon).
export function finishedText(done) {
  const result = typeof done.result === "string" && done.result !== "" ? ": " + done.result : "";
  return "Finished by " + String(done.holder) + " (token " + done.fencingToken + ")" + result;
}

// What a revoke ended: "Revoked on R: a #1, b #2."
export function revokedText(resource, revoked) {
  const names = revoked.map((p) => String(p.holder) + " #" + p.fencingToken).join(", ");
  return "Revoked on " + resource + ": " + names + ".";
}
