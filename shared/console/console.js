// leasekit operator console: live leases, revoke, audit.
//
// Rules this file keeps:
// - Caller text (holders, resources, reasons, actors, error sentences) is text: the DOM is built
//   with createElement + textContent only; nothing from the API is ever parsed as HTML.
// - The API key and tenant live in this tab's sessionStorage only: never in the URL, never in
//   local storage, never logged.
// - Works under `script-src 'self'; style-src 'self'; connect-src 'self'`: no inline script or
//   style, no eval; looks change through classes.
"use strict";

(function () {
  const API_URL = new URL("../api/v1/lease", document.baseURI).href;
  const REFRESH_MS = 2000;
  const PAGE_SIZE = 25;
  const STORE_KEY = "leasekit.console.apiKey";
  const STORE_TENANT = "leasekit.console.tenant";
  const KEY_RE = /^[\x20-\x7e]{16,256}$/;
  const TENANT_RE = /^[A-Za-z0-9_.-]{1,64}$/;
  const PREFIX_RE = /^[A-Za-z0-9_.:/@+-]{0,200}$/;

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

  // Caller-chosen text may carry invisible bidi and format controls (U+202E turns the rest of
  // a line around, so "evil\u202Egnp.exe" reads as something else): each is shown as its code
  // point, and caller text is isolated from its neighbours (console.css), so it reads as what it is.
  const CONTROLS = /[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

  function shown(text) {
    return String(text).replace(
      CONTROLS,
      (c) => "[U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "]",
    );
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = shown(text);
    return node;
  }

  function show(node, visible) {
    node.hidden = !visible;
  }

  function setStatus(text, kind, from) {
    ui.status.textContent = text || "";
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
      if (key && tenant && KEY_RE.test(key) && TENANT_RE.test(tenant)) return { key, tenant };
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

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message || "request failed");
      this.status = status;
      this.code = code || "";
    }
  }

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
    if (!response.ok) {
      const error = payload && typeof payload.error === "string" ? payload.error : "";
      const code = payload && typeof payload.code === "string" ? payload.code : "";
      throw new ApiError(response.status, code, error || "the server answered " + response.status);
    }
    if (!payload || typeof payload.data !== "object" || payload.data === null) {
      throw new ApiError(response.status, "BAD_ANSWER", "the answer had no data");
    }
    return payload;
  }

  // A sentence for an error, for the status line.
  function describe(err, what) {
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

  function noteServerTime(payload) {
    const proof = payload && payload._provenance && payload._provenance.credential;
    const at = proof && (proof.validFrom || (proof.proof && proof.proof.created));
    const server = typeof at === "string" ? Date.parse(at) : NaN;
    if (Number.isFinite(server)) state.skewMs = server - Date.now();
  }

  function now() {
    return Date.now() + state.skewMs;
  }

  // ---------- time ----------

  function pad(n) {
    return String(n).padStart(2, "0");
  }

  // 2026-12-03 10:00:00 (this browser's time zone); the ISO time goes in title/datetime.
  function formatTime(iso) {
    const t = new Date(iso);
    if (Number.isNaN(t.getTime())) return String(iso);
    return (
      t.getFullYear() + "-" + pad(t.getMonth() + 1) + "-" + pad(t.getDate()) + " " +
      pad(t.getHours()) + ":" + pad(t.getMinutes()) + ":" + pad(t.getSeconds())
    );
  }

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
    if (!Number.isFinite(entry.at)) {
      entry.el.textContent = "?";
      return;
    }
    const seconds = Math.floor((entry.at - t) / 1000);
    const text = seconds > 0 ? entry.prefix + seconds + " s" : "expired";
    if (entry.el.textContent !== text) entry.el.textContent = text;
    entry.el.classList.toggle("soon", seconds > 0 && seconds <= 10);
    entry.el.classList.toggle("expired", seconds <= 0);
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
    const body = { op: "list", pageSize: PAGE_SIZE };
    if (state.prefix) body.prefix = state.prefix;
    if (page.cursor) body.cursor = page.cursor;
    try {
      const payload = await api(body);
      if (seq !== page.seq) return;
      noteServerTime(payload);
      const data = payload.data;
      const leases = Array.isArray(data.leases) ? data.leases : [];
      page.next = typeof data.nextCursor === "string" && data.nextCursor ? data.nextCursor : null;
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

  function holdersOf(lease) {
    if (Array.isArray(lease.holders)) return lease.holders;
    if (lease.granted && typeof lease.holder === "string") {
      return [{ holder: lease.holder, fencingToken: lease.fencingToken, expiresAt: lease.expiresAt }];
    }
    return [];
  }

  function renderLeases(leases) {
    const page = state.leases;
    const fingerprint = JSON.stringify(leases);
    if (fingerprint === page.shown) return; // unchanged: keep the DOM (focus, selection) as it is
    page.shown = fingerprint;
    state.countdowns = [];
    const nodes = [];
    if (leases.length === 0) {
      let text = "No live leases";
      if (state.prefix) text += " whose name starts with \u201c" + state.prefix + "\u201d";
      if (page.page > 1) text += " on this page";
      nodes.push(el("p", "empty", text + "."));
    }
    for (const lease of leases) nodes.push(leaseCard(lease));
    ui.leases.replaceChildren(...nodes);
  }

  function leaseCard(lease) {
    const resource = String(lease.resource);
    const holders = holdersOf(lease);
    const waiters = Array.isArray(lease.waiters) ? lease.waiters : [];
    const limit = Number.isInteger(lease.limit) ? lease.limit : 1;

    const card = el("article", "lease");
    const head = el("div", "lease-head");
    const title = el("h3", "resource", resource);
    const meta = el("span", "lease-meta", "limit " + limit + (limit > 1 ? " \u00b7 " + holders.length + " held" : ""));
    const revokeAll = el("button", "button danger-quiet revoke-all", "Revoke all");
    revokeAll.type = "button";
    revokeAll.disabled = holders.length === 0;
    revokeAll.setAttribute("aria-label", "Revoke all permits of " + resource);
    revokeAll.addEventListener("click", () =>
      openRevoke({ resource, holder: null, token: null, count: holders.length }),
    );
    head.append(title, meta, revokeAll);
    card.append(head);

    if (holders.length) {
      const table = el("table", "holders");
      const thead = el("thead");
      const hr = el("tr");
      for (const name of ["Holder", "Fencing token", "Expires in", ""]) {
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
        const cToken = el("td", "cell-token");
        cToken.dataset.label = "Fencing token";
        cToken.append(el("span", "token", permit.fencingToken));
        const cExp = el("td", "cell-expires");
        cExp.dataset.label = "Expires in";
        cExp.append(countdown("expires", permit.expiresAt));
        const cAct = el("td", "cell-action");
        const revoke = el("button", "button danger-quiet revoke", "Revoke");
        revoke.type = "button";
        revoke.setAttribute("aria-label", "Revoke " + holder + " on " + resource);
        revoke.addEventListener("click", () =>
          openRevoke({ resource, holder, token: permit.fencingToken, count: 1 }),
        );
        cAct.append(revoke);
        row.append(cHolder, cToken, cExp, cAct);
        tbody.append(row);
      }
      table.append(thead, tbody);
      const scroller = el("div", "table-scroll");
      scroller.append(table);
      card.append(scroller);
    } else {
      card.append(el("p", "muted no-holder", "No holder now."));
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
    const body = { op: "audit", pageSize: PAGE_SIZE };
    if (page.cursor) body.cursor = page.cursor;
    try {
      const payload = await api(body);
      if (seq !== page.seq) return;
      const data = payload.data;
      page.forbidden = false;
      page.next = typeof data.nextCursor === "string" && data.nextCursor ? data.nextCursor : null;
      show(ui.auditNotice, false);
      show(ui.audit, true);
      renderAudit(Array.isArray(data.entries) ? data.entries : []);
      refreshSucceeded();
    } catch (err) {
      if (seq !== page.seq) return;
      if (err.status === 403) {
        // Not an admin: say so once and stop asking every round ("Refresh" asks again).
        page.forbidden = true;
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
    if (entries.length === 0) {
      nodes.push(el("li", "empty", page.page > 1 ? "No more entries." : "No revokes yet."));
    }
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
      el("span", "entry-resource", String(entry.resource)),
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
    field(list, "Ended", endedNode);
    field(list, "Reason", el("span", "reason", String(entry.reason)));
    item.append(list);
    return item;
  }

  // ---------- revoke ----------

  function openRevoke(target) {
    state.revoke = target;
    const what = ui.revokeWhat;
    what.replaceChildren();
    if (target.holder !== null) {
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
    ui.revokeError.textContent = text;
    show(ui.revokeError, Boolean(text));
  }

  async function submitRevoke(event) {
    event.preventDefault();
    const target = state.revoke;
    if (!target) return;
    const reason = ui.revokeReason.value.trim();
    const length = Array.from(reason).length;
    if (length < 1 || length > 200) {
      showRevokeError("Give a reason of 1 to 200 characters.");
      ui.revokeReason.focus();
      return;
    }
    const body = { op: "revoke", resource: target.resource, reason };
    if (target.holder !== null) body.holder = target.holder;
    // The permit on screen, by its token: a newer permit of the same holder is left alone.
    if (target.token !== null) body.token = target.token;
    ui.revokeConfirm.disabled = true;
    showRevokeError("");
    try {
      const payload = await api(body);
      const data = payload.data;
      const revoked = Array.isArray(data.revoked) ? data.revoked : [];
      if (state.revoke !== target) {
        refreshNow(); // cancelled meanwhile: still show what the revoke did
        return;
      }
      if (data.status === "fail" || revoked.length === 0) {
        const witnesses = Array.isArray(data.witnesses) ? data.witnesses : [];
        const detail = witnesses
          .map((w) => (w && typeof w.detail === "string" ? w.detail : ""))
          .filter(Boolean)
          .join("; ");
        showRevokeError("Nothing was revoked" + (detail ? ": " + detail : "") + ".");
        ui.revokeConfirm.disabled = false;
        refreshNow();
        return;
      }
      if (state.revoke === target) closeRevoke();
      const names = revoked.map((p) => String(p.holder) + " #" + p.fencingToken).join(", ");
      setStatus("Revoked on " + target.resource + ": " + names + ".", "ok");
      state.audit.forbidden = false;
      refreshNow();
    } catch (err) {
      if (err.code === "STALE" || state.revoke !== target) return;
      if (err.status === 401) {
        closeRevoke();
        signOut(describe(err), "error");
        return;
      }
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

  function resetPages() {
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
    if (!KEY_RE.test(key)) {
      setStatus("An API key is 16 to 256 printable ASCII characters.", "error");
      ui.apiKey.focus();
      return;
    }
    if (!TENANT_RE.test(tenant)) {
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
    const valid = PREFIX_RE.test(prefix);
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
})();
