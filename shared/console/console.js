// leasekit operator console: live leases, revoke, audit. The page's entry module
// (index.html loads it with <script type="module">): the DOM, the fetch, the refresh loop. What
// only computes text and values from values is in the modules it imports, tested by
// `node --test shared/console/test/`.
//
// Rules these modules keep:
// - Caller text (holders, resources, reasons, actors, error sentences) is text: the DOM is built
//   with createElement + textContent only; nothing from the API is ever parsed as HTML.
// - The API key and tenant live in this tab's sessionStorage only: never in the URL, never in
//   local storage, never logged.
// - Works under `script-src 'self'; style-src 'self'; connect-src 'self'`: no inline script or
//   style, no eval; looks change through classes. Modules are strict and import only their
//   neighbours here (each served under /console/ by shared/src/http/console.rs).

import { shown } from "./shown.js";
import { countdownText, formatTime } from "./time.js";
import {
  ApiError,
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
} from "./protocol.js";
import {
  describe,
  finishedText,
  limitText,
  noEntriesText,
  noLeasesText,
  nothingRevokedText,
  revokedText,
} from "./text.js";

const API_URL = new URL("../api/v1/lease", document.baseURI).href;
const REFRESH_MS = 2000;
const STORE_KEY = "leasekit.console.apiKey";
const STORE_TENANT = "leasekit.console.tenant";

const $ = (id) => document.getElementById(id);
const ui = {
  session: $("session"),
  sessionTenant: $("session-tenant"),
  signOut: $("sign-out"),
  status: $("status"),
  signinPanel: $("signin-panel"),
  signin: $("signin"),
  apiKey: $("api-key"),
  tenant: $("tenant"),
  signInButton: $("sign-in"),
  workspace: $("workspace"),
  filter: $("filter"),
  prefix: $("prefix"),
  leases: $("leases"),
  leasesUpdated: $("leases-updated"),
  leasesFirst: $("leases-first"),
  leasesNext: $("leases-next"),
  leasesPage: $("leases-page"),
  audit: $("audit"),
  auditNotice: $("audit-notice"),
  auditRefresh: $("audit-refresh"),
  auditFirst: $("audit-first"),
  auditNext: $("audit-next"),
  auditPage: $("audit-page"),
  auditPager: $("audit-pager"),
  dialog: $("revoke-dialog"),
  revokeForm: $("revoke-form"),
  revokeTitle: $("revoke-title"),
  revokeWhat: $("revoke-what"),
  revokeReason: $("revoke-reason"),
  revokeError: $("revoke-error"),
  revokeCancel: $("revoke-cancel"),
  revokeConfirm: $("revoke-confirm"),
};

// Everything about the signed-in session; reset on sign-out.
const state = {
  key: null,
  tenant: null,
  session: 0, // bumped on every sign-in and sign-out: answers of an older session are dropped
  tick: 0, // the latest refresh round; only it schedules the next one
  timer: null,
  clock: null,
  skewMs: 0, // server clock minus this browser's, from the answers' signing time
  prefix: "",
  prefixTimer: null,
  leases: { cursor: null, next: null, page: 1, seq: 0, shown: null },
  audit: { cursor: null, next: null, page: 1, seq: 0, shown: null, forbidden: false },
  countdowns: [], // [{el, at}] ticking every second
  revoke: null, // {resource, holder|null, token|null, count}
  statusFrom: null, // "refresh" when the status line shows a refresh's error
};

// ---------- small DOM helpers (text only) ----------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = shown(text);
  return node;
}

function show(node, visible) {
  node.hidden = !visible;
}

// Status lines and the revoke error carry caller text (holders, details the API echoes): shown
// as every other caller text is, bidi and format controls as their code points.
function setStatus(text, kind, from) {
  ui.status.textContent = shown(text || "");
  ui.status.className = "status" + (kind ? " status-" + kind : "");
  show(ui.status, Boolean(text));
  state.statusFrom = text ? from || null : null;
}

// ---------- session storage ----------

function storage() {
  try {
    return window.sessionStorage;
  } catch (_) {
    return null; // storage disabled: the session lasts as long as the page
  }
}

function saveCredentials(key, tenant) {
  const s = storage();
  if (!s) return;
  try {
    s.setItem(STORE_KEY, key);
    s.setItem(STORE_TENANT, tenant);
  } catch (_) {
    /* quota or disabled: keep it in memory only */
  }
}

function loadCredentials() {
  const s = storage();
  if (!s) return null;
  try {
    const key = s.getItem(STORE_KEY);
    const tenant = s.getItem(STORE_TENANT);
    if (key && tenant && validKey(key) && validTenant(tenant)) return { key, tenant };
  } catch (_) {
    /* ignore */
  }
  return null;
}

function clearCredentials() {
  const s = storage();
  if (!s) return;
  try {
    s.removeItem(STORE_KEY);
    s.removeItem(STORE_TENANT);
  } catch (_) {
    /* ignore */
  }
}

// ---------- the API ----------

async function api(body) {
  const session = state.session;
  let response;
  try {
    response = await fetch(API_URL, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json",
        "X-API-KEY": state.key,
      },
      body: JSON.stringify(Object.assign({}, body, { tenantId: state.tenant })),
      cache: "no-store",
      credentials: "same-origin",
      redirect: "error",
      referrerPolicy: "no-referrer",
    });
  } catch (_) {
    throw new ApiError(0, "NETWORK", "could not reach the server");
  }
  let payload = null;
  try {
    payload = await response.json();
  } catch (_) {
    payload = null;
  }
  if (session !== state.session) throw new ApiError(0, "STALE", "signed out meanwhile");
  return checkAnswer(response.status, response.ok, payload);
}

function noteServerTime(payload) {
  const server = signedAt(payload);
  if (Number.isFinite(server)) state.skewMs = server - Date.now();
}

function now() {
  return Date.now() + state.skewMs;
}

// ---------- time ----------

function timeEl(className, iso, text) {
  const node = el("time", className, text);
  if (typeof iso === "string") {
    node.dateTime = iso;
    node.title = formatTime(iso);
  }
  return node;
}

// A countdown to `iso`, ticking every second.
function countdown(className, iso, prefix) {
  const node = timeEl(className + " countdown", iso, "");
  const at = Date.parse(iso);
  const entry = { el: node, at: Number.isFinite(at) ? at : NaN, prefix: prefix || "" };
  state.countdowns.push(entry);
  paintCountdown(entry, now());
  return node;
}

function paintCountdown(entry, t) {
  const shows = countdownText(entry.at, t, entry.prefix);
  if (!shows.known) {
    entry.el.textContent = shows.text;
    return;
  }
  if (entry.el.textContent !== shows.text) entry.el.textContent = shows.text;
  entry.el.classList.toggle("soon", shows.soon);
  entry.el.classList.toggle("expired", shows.expired);
}

function tickCountdowns() {
  const t = now();
  for (const entry of state.countdowns) paintCountdown(entry, t);
}

// ---------- refresh loop ----------

function scheduleNext(tick) {
  if (tick !== state.tick || !state.key) return;
  clearTimeout(state.timer);
  state.timer = setTimeout(() => {
    if (document.visibilityState === "hidden") return; // resumed on visibilitychange
    refreshNow();
  }, REFRESH_MS);
}

// One round: the leases page and (unless it was refused) the audit page, then the next round
// 2 s after this one ends. A newer round supersedes an older one still in flight.
function refreshNow() {
  if (!state.key) return Promise.resolve();
  clearTimeout(state.timer);
  const tick = ++state.tick;
  const jobs = [loadLeases()];
  if (!state.audit.forbidden) jobs.push(loadAudit());
  return Promise.all(jobs).then(() => scheduleNext(tick));
}

function onRefreshError(err, what) {
  if (err.code === "STALE") return;
  if (err.status === 401) {
    signOut(describe(err), "error");
    return;
  }
  setStatus(describe(err, what), "error", "refresh");
}

function refreshSucceeded() {
  if (state.statusFrom === "refresh") setStatus("");
}

// ---------- leases ----------

async function loadLeases() {
  const page = state.leases;
  const seq = ++page.seq;
  try {
    const payload = await api(listRequest(state.prefix, page.cursor));
    if (seq !== page.seq) return;
    noteServerTime(payload);
    const data = payload.data;
    const leases = Array.isArray(data.leases) ? data.leases : [];
    page.next = nextCursor(data);
    renderLeases(leases);
    ui.leasesUpdated.textContent = "Updated " + formatTime(new Date().toISOString());
    refreshSucceeded();
  } catch (err) {
    if (seq !== page.seq) return;
    onRefreshError(err, "Could not list leases");
  }
  renderLeasePager();
}

function renderLeasePager() {
  const page = state.leases;
  ui.leasesFirst.disabled = page.page <= 1;
  ui.leasesNext.disabled = !page.next;
  ui.leasesPage.textContent = "Page " + page.page;
}

function renderLeases(leases) {
  const page = state.leases;
  const fingerprint = JSON.stringify(leases);
  if (fingerprint === page.shown) return; // unchanged: keep the DOM (focus, selection) as it is
  page.shown = fingerprint;
  state.countdowns = [];
  const nodes = [];
  if (leases.length === 0) nodes.push(el("p", "empty", noLeasesText(state.prefix, page.page)));
  for (const lease of leases) nodes.push(leaseCard(lease));
  ui.leases.replaceChildren(...nodes);
}

function leaseCard(lease) {
  const resource = String(lease.resource);
  const holders = holdersOf(lease);
  const waiters = Array.isArray(lease.waiters) ? lease.waiters : [];
  const limit = limitOf(lease);

  const card = el("article", "lease");
  const head = el("div", "lease-head");
  const title = el("h3", "resource", resource);
  const meta = el("span", "lease-meta", limitText(limit, holders.length));
  const revokeAll = el("button", "button danger-quiet revoke-all", "Revoke all");
  revokeAll.type = "button";
  revokeAll.disabled = holders.length === 0;
  revokeAll.setAttribute("aria-label", "Revoke all permits of " + shown(resource));
  revokeAll.addEventListener("click", () =>
    openRevoke({ resource, holder: null, token: null, count: holders.length }),
  );
  head.append(title, meta, revokeAll);
  card.append(head);

  if (holders.length) {
    const table = el("table", "holders");
    const thead = el("thead");
    const hr = el("tr");
    for (const name of ["Holder", "Value", "Fencing token", "Expires in", "Session", ""]) {
      const th = el("th", null, name);
      th.scope = "col";
      hr.append(th);
    }
    thead.append(hr);
    const tbody = el("tbody");
    for (const permit of holders) {
      const holder = String(permit.holder);
      const row = el("tr", "permit");
      const cHolder = el("td", "cell-holder");
      cHolder.dataset.label = "Holder";
      cHolder.append(el("span", "holder", holder));
      // The holder's note (a leader's address, progress): caller text, shown as text.
      const value = typeof permit.value === "string" ? permit.value : null;
      const cValue = el("td", "cell-value");
      cValue.dataset.label = "Value";
      cValue.append(value === null ? el("span", "muted no-value", "none") : el("span", "value", value));
      const cToken = el("td", "cell-token");
      cToken.dataset.label = "Fencing token";
      cToken.append(el("span", "token", permit.fencingToken));
      const cExp = el("td", "cell-expires");
      cExp.dataset.label = "Expires in";
      cExp.append(countdown("expires", permit.expiresAt));
      // A permit in a session lives as long as the session: revoking the session ends it and
      // every other permit in it.
      const session = typeof permit.session === "string" ? permit.session : null;
      const cSession = el("td", "cell-session");
      cSession.dataset.label = "Session";
      cSession.append(el("span", "session", session === null ? "none" : session));
      const cAct = el("td", "cell-action");
      const revoke = el("button", "button danger-quiet revoke", "Revoke");
      revoke.type = "button";
      revoke.setAttribute("aria-label", "Revoke " + shown(holder) + " on " + shown(resource));
      revoke.addEventListener("click", () =>
        openRevoke({ resource, holder, token: permit.fencingToken, count: 1 }),
      );
      cAct.append(revoke);
      if (session !== null) {
        const ending = el("button", "button danger-quiet revoke-session", "Revoke session");
        ending.type = "button";
        ending.setAttribute("aria-label", "Revoke the session of " + shown(holder) + " on " + shown(resource));
        ending.addEventListener("click", () =>
          openRevoke({ resource, holder, token: null, session, count: 1 }),
        );
        cAct.append(ending);
      }
      row.append(cHolder, cValue, cToken, cExp, cSession, cAct);
      tbody.append(row);
    }
    table.append(thead, tbody);
    const scroller = el("div", "table-scroll");
    scroller.append(table);
    card.append(scroller);
  } else {
    card.append(el("p", "muted no-holder", "No holder now."));
  }

  // Finished (a done release): who finished it and its result, until when, and (for an admin)
  // a Reopen that ends the mark early, audited as a revoke is.
  const done = doneOf(lease);
  if (done !== null) {
    const finished = el("div", "finished");
    finished.append(el("span", "finished-text", finishedText(done)));
    if (typeof done.until === "string") finished.append(" ", countdown("until", done.until, "for "));
    const reopen = el("button", "button danger-quiet reopen", "Reopen");
    reopen.type = "button";
    reopen.setAttribute("aria-label", "Reopen " + shown(resource));
    reopen.addEventListener("click", () => openRevoke({ resource, reopen: true, done }));
    finished.append(reopen);
    card.append(finished);
  }

  if (waiters.length) {
    card.append(el("h4", "waiters-title", "Waiting (" + waiters.length + ")"));
    const list = el("ol", "waiters");
    for (const waiter of waiters) {
      const item = el("li", "waiter");
      item.append(el("span", "holder", String(waiter.holder)));
      if (typeof waiter.until === "string") {
        item.append(" ", countdown("until", waiter.until, "place kept "));
      }
      list.append(item);
    }
    card.append(list);
  }
  return card;
}

// ---------- audit ----------

async function loadAudit() {
  const page = state.audit;
  const seq = ++page.seq;
  try {
    const payload = await api(auditRequest(page.cursor));
    if (seq !== page.seq) return;
    const data = payload.data;
    page.forbidden = false;
    setAdmin("yes");
    page.next = nextCursor(data);
    show(ui.auditNotice, false);
    show(ui.audit, true);
    renderAudit(Array.isArray(data.entries) ? data.entries : []);
    refreshSucceeded();
  } catch (err) {
    if (seq !== page.seq) return;
    if (err.status === 403) {
      // Not an admin: say so once and stop asking every round ("Refresh" asks again).
      page.forbidden = true;
      setAdmin("no");
      page.next = null;
      page.shown = null;
      ui.audit.replaceChildren();
      show(ui.audit, false);
      ui.auditNotice.textContent = "The audit needs an admin key: this key has no admin role.";
      show(ui.auditNotice, true);
    } else {
      onRefreshError(err, "Could not read the audit");
    }
  }
  renderAuditPager();
}

function renderAuditPager() {
  const page = state.audit;
  ui.auditFirst.disabled = page.page <= 1;
  ui.auditNext.disabled = !page.next;
  ui.auditPage.textContent = "Page " + page.page;
  show(ui.auditPager, !page.forbidden);
}

function renderAudit(entries) {
  const page = state.audit;
  const fingerprint = JSON.stringify(entries);
  if (fingerprint === page.shown) return;
  page.shown = fingerprint;
  const nodes = [];
  if (entries.length === 0) nodes.push(el("li", "empty", noEntriesText(page.page)));
  for (const entry of entries) nodes.push(auditEntry(entry));
  ui.audit.replaceChildren(...nodes);
}

function field(list, name, value) {
  const dt = el("dt", null, name);
  const dd = el("dd");
  if (value instanceof Node) dd.append(value);
  else dd.textContent = shown(value);
  list.append(dt, dd);
  return dd;
}

function auditEntry(entry) {
  const item = el("li", "entry");
  const head = el("div", "entry-head");
  head.append(
    timeEl("at", entry.at, formatTime(entry.at)),
    // A session's revoke has no one resource: it names the session.
    el(
      "span",
      "entry-resource",
      entry.resource === null ? "session " + String(entry.session) : String(entry.resource),
    ),
  );
  item.append(head);
  const list = el("dl", "entry-fields");
  field(list, "Actor", el("span", "actor", String(entry.actor)));
  const ended = Array.isArray(entry.ended) ? entry.ended : [];
  const endedNode = el("span", "ended");
  if (ended.length === 0) endedNode.textContent = "nothing";
  ended.forEach((permit, i) => {
    if (i) endedNode.append(", ");
    const one = el("span", "ended-permit");
    one.append(el("span", "holder", String(permit.holder)), el("span", "token", " #" + permit.fencingToken));
    endedNode.append(one);
  });
  // A reopen ended a finished mark, not a permit.
  const reopened = entry.reopened && typeof entry.reopened === "object" ? entry.reopened : null;
  if (reopened !== null) field(list, "Reopened", el("span", "reopened", finishedText(reopened)));
  else field(list, "Ended", endedNode);
  field(list, "Reason", el("span", "reason", String(entry.reason)));
  item.append(list);
  return item;
}

// ---------- revoke ----------

function openRevoke(target) {
  state.revoke = target;
  const what = ui.revokeWhat;
  what.replaceChildren();
  if (target.reopen) {
    ui.revokeTitle.textContent = "Reopen a finished resource";
    what.append(
      "End the finished mark of ",
      el("strong", "resource-name", target.resource),
      " (done by ",
      el("strong", "holder", String(target.done.holder)),
      "): it can be acquired again, with a token larger than every one before.",
    );
  } else if (target.session) {
    ui.revokeTitle.textContent = "Revoke a session";
    what.append(
      "End session ",
      el("strong", "session", target.session),
      " of ",
      el("strong", "holder", target.holder),
      " and every permit in it, on ",
      el("strong", "resource-name", target.resource),
      " and elsewhere.",
    );
  } else if (target.holder !== null) {
    ui.revokeTitle.textContent = "Revoke a permit";
    what.append(
      "End the permit of ",
      el("strong", "holder", target.holder),
      " (fencing token " + target.token + ") on ",
      el("strong", "resource-name", target.resource),
      ".",
    );
  } else {
    ui.revokeTitle.textContent = "Revoke all permits";
    what.append(
      "End every permit (" + target.count + ") on ",
      el("strong", "resource-name", target.resource),
      ". Waiters are served next.",
    );
  }
  ui.revokeConfirm.textContent = target.reopen ? "Confirm reopen" : "Confirm revoke";
  ui.revokeReason.value = "";
  showRevokeError("");
  ui.revokeConfirm.disabled = false;
  if (typeof ui.dialog.showModal === "function") {
    if (!ui.dialog.open) ui.dialog.showModal();
  } else {
    ui.dialog.setAttribute("open", "");
  }
  ui.revokeReason.focus();
}

function closeRevoke() {
  state.revoke = null;
  if (ui.dialog.open) {
    if (typeof ui.dialog.close === "function") ui.dialog.close();
    else ui.dialog.removeAttribute("open");
  }
}

function showRevokeError(text) {
  ui.revokeError.textContent = shown(text || "");
  show(ui.revokeError, Boolean(text));
}

async function submitRevoke(event) {
  event.preventDefault();
  const target = state.revoke;
  if (!target) return;
  const reason = ui.revokeReason.value.trim();
  if (!validReason(reason)) {
    showRevokeError("Give a reason of 1 to 200 characters.");
    ui.revokeReason.focus();
    return;
  }
  ui.revokeConfirm.disabled = true;
  showRevokeError("");
  try {
    const payload = await api(revokeRequest(target, reason));
    const data = payload.data;
    const revoked = Array.isArray(data.revoked) ? data.revoked : [];
    if (state.revoke !== target) {
      refreshNow(); // cancelled meanwhile: still show what the revoke did
      return;
    }
    if (target.reopen && data.status === "pass") {
      closeRevoke();
      setStatus("Reopened " + target.resource + ".", "ok");
      state.audit.forbidden = false;
      refreshNow();
      return;
    }
    if (data.status === "fail" || (!target.reopen && revoked.length === 0)) {
      showRevokeError(nothingRevokedText(data.witnesses));
      ui.revokeConfirm.disabled = false;
      refreshNow();
      return;
    }
    if (state.revoke === target) closeRevoke();
    setStatus(revokedText(target.resource, revoked), "ok");
    state.audit.forbidden = false;
    refreshNow();
  } catch (err) {
    if (err.code === "STALE" || state.revoke !== target) return;
    if (err.status === 401) {
      closeRevoke();
      signOut(describe(err), "error");
      return;
    }
    if (err.status === 403) setAdmin("no");
    const message =
      err.status === 403
        ? "Forbidden: this key has no admin role. Nothing was revoked."
        : describe(err, "Revoke failed");
    showRevokeError(message);
    setStatus(message, "error");
    ui.revokeConfirm.disabled = false;
  }
}

// ---------- sign in / out ----------

// Whether this key may revoke: "yes" once the audit (an admin's op) answers, "no" once it or a
// revoke is refused, "unknown" until then. The Revoke buttons show only for "yes" (console.css):
// a key that may not revoke is not offered a button that can only be refused.
function setAdmin(known) {
  document.body.dataset.admin = known;
}

function resetPages() {
  setAdmin("unknown");
  state.leases = { cursor: null, next: null, page: 1, seq: 0, shown: null };
  state.audit = { cursor: null, next: null, page: 1, seq: 0, shown: null, forbidden: false };
  state.countdowns = [];
  ui.leases.replaceChildren();
  ui.audit.replaceChildren();
  show(ui.audit, true);
  show(ui.auditNotice, false);
  ui.leasesUpdated.textContent = "";
  renderLeasePager();
  renderAuditPager();
}

function startSession(key, tenant) {
  state.session++;
  state.key = key;
  state.tenant = tenant;
  state.skewMs = 0;
  resetPages();
  ui.sessionTenant.textContent = tenant;
  show(ui.session, true);
  show(ui.signinPanel, false);
  show(ui.workspace, true);
  clearInterval(state.clock);
  state.clock = setInterval(tickCountdowns, 1000);
  refreshNow();
}

function signOut(message, kind) {
  state.session++;
  state.tick++;
  clearTimeout(state.timer);
  clearTimeout(state.prefixTimer);
  clearInterval(state.clock);
  closeRevoke();
  clearCredentials();
  const tenant = state.tenant;
  state.key = null;
  state.tenant = null;
  resetPages();
  show(ui.workspace, false);
  show(ui.session, false);
  ui.sessionTenant.textContent = "";
  show(ui.signinPanel, true);
  ui.apiKey.value = "";
  if (tenant && !ui.tenant.value) ui.tenant.value = tenant;
  setStatus(message || "", kind || "info");
  ui.apiKey.focus();
}

function onSignIn(event) {
  event.preventDefault();
  const key = ui.apiKey.value.trim();
  const tenant = ui.tenant.value.trim();
  if (!validKey(key)) {
    setStatus("An API key is 16 to 256 printable ASCII characters.", "error");
    ui.apiKey.focus();
    return;
  }
  if (!validTenant(tenant)) {
    setStatus("A tenant is 1 to 64 letters, digits, '_', '.' or '-'.", "error");
    ui.tenant.focus();
    return;
  }
  ui.apiKey.value = ""; // the key is not kept in the form
  saveCredentials(key, tenant);
  setStatus("");
  startSession(key, tenant);
}

// ---------- filter and paging ----------

function applyPrefix() {
  const prefix = ui.prefix.value.trim();
  const valid = validPrefix(prefix);
  ui.prefix.setAttribute("aria-invalid", valid ? "false" : "true");
  if (!valid) {
    setStatus("A prefix is up to 200 letters, digits or _ . : / @ + -", "error", "prefix");
    return;
  }
  if (state.statusFrom === "prefix") setStatus("");
  if (prefix === state.prefix) return;
  state.prefix = prefix;
  state.leases.cursor = null;
  state.leases.next = null;
  state.leases.page = 1;
  state.leases.shown = null;
  refreshNow();
}

function wire() {
  ui.signin.addEventListener("submit", onSignIn);
  ui.signOut.addEventListener("click", () => signOut("Signed out.", "info"));
  ui.filter.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(state.prefixTimer);
    applyPrefix();
  });
  ui.prefix.addEventListener("input", () => {
    clearTimeout(state.prefixTimer);
    state.prefixTimer = setTimeout(applyPrefix, 400);
  });
  for (const name of ["change", "search"]) {
    ui.prefix.addEventListener(name, () => {
      clearTimeout(state.prefixTimer);
      applyPrefix();
    });
  }
  ui.leasesNext.addEventListener("click", () => {
    const page = state.leases;
    if (!page.next) return;
    page.cursor = page.next;
    page.next = null;
    page.page++;
    page.shown = null;
    refreshNow();
  });
  ui.leasesFirst.addEventListener("click", () => {
    const page = state.leases;
    page.cursor = null;
    page.next = null;
    page.page = 1;
    page.shown = null;
    refreshNow();
  });
  ui.auditNext.addEventListener("click", () => {
    const page = state.audit;
    if (!page.next) return;
    page.cursor = page.next;
    page.next = null;
    page.page++;
    page.shown = null;
    loadAudit();
  });
  ui.auditFirst.addEventListener("click", () => {
    const page = state.audit;
    page.cursor = null;
    page.next = null;
    page.page = 1;
    page.shown = null;
    loadAudit();
  });
  ui.auditRefresh.addEventListener("click", () => {
    state.audit.forbidden = false;
    loadAudit();
  });
  ui.revokeForm.addEventListener("submit", submitRevoke);
  ui.revokeCancel.addEventListener("click", closeRevoke);
  ui.dialog.addEventListener("close", () => {
    state.revoke = null;
  });
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && state.key) refreshNow();
  });
}

wire();
ui.signInButton.disabled = false;
const saved = loadCredentials();
if (saved) startSession(saved.key, saved.tenant);
else ui.apiKey.focus();
