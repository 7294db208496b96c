"""The operator console (`/console/`) in a real browser: headless Debian chromium driven by Selenium.

One `leasekit serve` with a plain key and an admin key of the same account. Another client (plain
urllib POSTs) acquires and releases leases whose holders are hostile markup; the page must show
them within 5 s as literal text (no element made, no script run), offer no revoke to the plain key
(its audit is refused: FORBIDDEN), revoke with the admin key (the lease goes, the audit shows the
reason as text), fit a phone's width, and run under its CSP without a single violation. With
LEASEKIT_SCREENSHOTS=1 the wide page's picture, the docs page's and the root page's go to docs/console.png,
docs/docs-page.png and docs/root-page.png (else to a temporary folder, so a test run leaves the tree as it was).

The browser must be Debian's (`apt-get install chromium chromium-driver`, tests/run.sh does it):
Selenium is given the driver and the binary, so Selenium Manager never runs (it would download).
Without them the tests skip, unless CI is set: there a missing browser fails.
"""

import json
import os
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser

import pytest

from conftest import API_KEY, needs_own_server, start_serve, stop_serve

# Selenium Manager must never run (no network but loopback here) and never report usage.
os.environ.setdefault("SE_OFFLINE", "true")
os.environ.setdefault("SE_AVOID_STATS", "true")

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ADMIN_KEY = "interop-admin-key-0123456789"
CONSOLE_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "console")
SCREENSHOTS = (os.path.join(os.path.dirname(__file__), "..", "..", "docs")
               if os.environ.get("LEASEKIT_SCREENSHOTS") == "1" else tempfile.mkdtemp())
SCREENSHOT = os.path.join(SCREENSHOTS, "console.png")
DOCS_SCREENSHOT = os.path.join(SCREENSHOTS, "docs-page.png")

# Hostile caller text: shown literally or the page is broken (or worse).
HOSTILE_HOLDER = '<img src=x onerror="window.__pwned=1">'
HOSTILE_REASON = "<b>wedged</b> worker <script>window.__pwned=2</script>"
HOSTILE_VALUE = '10.0.0.7:8080 <svg onload="window.__pwned=3">'

# The page asks every 2 s: a change must show within 5 s.
SHOWS_WITHIN = 5


def browser_missing() -> list:
    return [path for path in (CHROMIUM, CHROMEDRIVER) if not (os.path.isfile(path) and os.access(path, os.X_OK))]


def post(url, key, body, timeout=10):
    """POST /api/v1/lease as another client: (status, JSON body)."""
    request = urllib.request.Request(
        url + "/api/v1/lease",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json", "X-API-KEY": key},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def lease_op(url, key, body):
    """A lease call that must answer 200: its data."""
    status, answer = post(url, key, body)
    assert status == 200, (body.get("op"), status, answer)
    return answer["data"]


@pytest.fixture(scope="module")
def console():
    """A server of our own with a plain key and an admin key of one account (acme)."""
    needs_own_server("registers an admin key (--admin-key) for the revoke and the audit")
    process, url = start_serve("--admin-key", f"acme:{ADMIN_KEY}")
    yield url
    stop_serve(process)


@pytest.fixture(scope="module")
def browser():
    missing = browser_missing()
    if missing:
        why = f"{', '.join(missing)} missing: apt-get install chromium chromium-driver (tests/run.sh does)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    profile = tempfile.mkdtemp(prefix="leasekit-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-proxy-server",
        # Only 127.0.0.1 is ever contacted: no background services, and every other name fails.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-domain-reliability",
        "--disable-sync",
        "--disable-client-side-phishing-detection",
        "--disable-default-apps",
        "--disable-extensions",
        "--no-first-run",
        "--no-default-browser-check",
        "--metrics-recording-only",
        "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
        "--window-size=1280,800",
        f"--user-data-dir={profile}",
    ]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    # Every CSP violation of any page, recorded before the page's own scripts run.
    driver.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument",
        {
            "source": "window.__csp = []; document.addEventListener('securitypolicyviolation', "
            "e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI), true);"
        },
    )
    wide(driver)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wide(driver):
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
    )


def phone(driver):
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}
    )


class Console:
    """The page, as a person uses it: by labels, buttons and what it shows."""

    def __init__(self, driver, url):
        self.driver = driver
        self.url = url
        self.log = []

    def open(self):
        self.driver.get(self.url + "/console/")
        self.wait(lambda: self.js("return document.readyState") == "complete", "the page to load")

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def wait(self, condition, what, timeout=SHOWS_WITHIN):
        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)).until(
                lambda _: condition()
            )
        except Exception as error:  # a TimeoutException says nothing about what we waited for
            raise AssertionError(
                f"waited {timeout} s for {what}; status line: {self.text('#status')!r}; leases: {self.text('#leases')!r}"
            ) from error

    def text(self, selector):
        return self.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", selector)

    def visible(self, selector):
        return self.js("const e = document.querySelector(arguments[0]); return !!e && e.getClientRects().length > 0", selector)

    def by_label(self, label):
        """The input a <label for=...> with exactly this text names."""
        labels = [
            e for e in self.driver.find_elements(By.TAG_NAME, "label") if e.get_property("textContent").strip() == label
        ]
        assert len(labels) == 1, f"one label {label!r} expected, found {len(labels)}"
        target = labels[0].get_attribute("for")
        assert target, f"label {label!r} has no for="
        return self.driver.find_element(By.ID, target)

    def visible_buttons(self, text, within=None):
        scope = within or self.driver
        return [
            b
            for b in scope.find_elements(By.TAG_NAME, "button")
            if b.get_property("textContent").strip() == text and b.is_displayed()
        ]

    def button(self, text, within=None):
        found = self.visible_buttons(text, within)
        assert found, f"no visible button {text!r}"
        return found[0]

    def sign_in(self, key, tenant):
        self.by_label("API key").clear()
        self.by_label("API key").send_keys(key)
        self.by_label("Tenant").clear()
        self.by_label("Tenant").send_keys(tenant)
        self.button("Sign in").click()

    def sign_out(self):
        self.button("Sign out").click()
        self.wait(lambda: self.visible("#signin-panel"), "the sign-in form after signing out")

    def card(self, resource):
        """The lease card of `resource`, or None."""
        for card in self.driver.find_elements(By.CSS_SELECTOR, "#leases .lease"):
            if card.find_element(By.CSS_SELECTOR, ".resource").get_property("textContent") == resource:
                return card
        return None

    def holders(self, resource):
        card = self.card(resource)
        if card is None:
            return None
        return [e.get_property("textContent") for e in card.find_elements(By.CSS_SELECTOR, ".permit .holder")]

    def revoke(self, resource, holder, reason):
        """Revoke `holder`'s permit on `resource` in the page, giving `reason`."""
        card = self.wait(lambda: self.card(resource), f"{resource} on the page")
        rows = [
            row
            for row in card.find_elements(By.CSS_SELECTOR, ".permit")
            if row.find_element(By.CSS_SELECTOR, ".holder").get_property("textContent") == holder
        ]
        assert len(rows) == 1, f"one row of {holder!r} expected on {resource}"
        # Offered once the key is known to be an admin's (its audit answered).
        self.wait(lambda: self.visible_buttons("Revoke", rows[0]), "the Revoke button")
        self.button("Revoke", within=rows[0]).click()
        dialog = self.driver.find_element(By.ID, "revoke-dialog")
        self.wait(lambda: dialog.is_displayed(), "the revoke dialog")
        reason_input = self.by_label("Reason")
        reason_input.clear()
        reason_input.send_keys(reason)
        self.button("Confirm revoke", within=dialog).click()
        return dialog

    def collect_log(self):
        self.log += self.driver.get_log("browser")
        return self.log

    def assert_no_csp_violation(self):
        violations = self.js("return window.__csp || []")
        assert violations == [], f"CSP violations: {violations}"
        bad = [
            entry["message"]
            for entry in self.collect_log()
            if "Content Security Policy" in entry["message"]
            or "Content-Security-Policy" in entry["message"]
            or "Uncaught" in entry["message"]
        ]
        assert bad == [], f"browser console: {bad}"

    def assert_not_pwned(self):
        assert self.js("return typeof window.__pwned") == "undefined", "caller text ran as script"
        assert self.js("return document.querySelectorAll('img, b, script:not([src])').length") == 0, (
            "caller text became elements"
        )


def test_console_shows_live_leases_revokes_and_audits_in_a_real_browser(console, browser):
    url = console
    tenant = "acme-ops"  # our own server (needs_own_server): a fixed name keeps docs/console.png stable
    page = Console(browser, url)
    resource = "deploy:prod"
    acquire = {"op": "acquire", "tenantId": tenant, "resource": resource, "holder": HOSTILE_HOLDER, "ttlSeconds": 60}

    # 1. Sign in: a key the server does not know is refused, then the plain (non-admin) key.
    page.open()
    page.assert_no_csp_violation()
    page.sign_in("not-a-key-of-this-server-000", tenant)
    page.wait(lambda: "refused" in (page.text("#status") or ""), "the refused key's message")
    page.wait(lambda: page.visible("#signin-panel"), "the sign-in form again after a refused key")
    page.sign_in(API_KEY, tenant)
    page.wait(lambda: page.visible("#leases .empty"), "the empty state of a new tenant")
    assert "No live leases" in page.text("#leases")
    assert page.js("return sessionStorage.length") == 2, "the key and tenant live in sessionStorage"
    assert page.js("return localStorage.length") == 0, "nothing goes to localStorage"
    assert API_KEY not in browser.current_url and tenant not in browser.current_url
    # A plain key may not read the audit: the page says so.
    page.wait(lambda: page.visible("#audit-notice"), "the audit's admin-only notice")
    assert "audit needs an admin key" in page.text("#audit-notice")

    # 2. Another client takes the lease; the page shows it, the hostile holder as literal text.
    held = lease_op(url, API_KEY, acquire)
    assert held["granted"] is True
    # A semaphore with one holder and a waiter too (the screenshot shows every part of a card).
    jobs = "jobs:nightly"
    lease_op(url, API_KEY, {"op": "acquire", "tenantId": tenant, "resource": jobs, "holder": "runner-a", "ttlSeconds": 120, "limit": 2})
    lease_op(url, API_KEY, {"op": "acquire", "tenantId": tenant, "resource": jobs, "holder": "runner-b", "ttlSeconds": 90, "limit": 2})
    waiter = threading.Thread(
        target=post,
        args=(url, API_KEY, {"op": "acquire", "tenantId": tenant, "resource": jobs, "holder": "runner-c", "ttlSeconds": 60, "limit": 2, "waitSeconds": 1}),
    )
    waiter.start()
    started = time.monotonic()
    page.wait(lambda: page.holders(resource) == [HOSTILE_HOLDER], "the lease with its holder as text")
    assert time.monotonic() - started <= SHOWS_WITHIN
    waiter.join()
    page.wait(
        lambda: [e.get_property("textContent") for e in page.card(jobs).find_elements(By.CSS_SELECTOR, ".waiter .holder")]
        == ["runner-c"],
        "the waiter in the queue",
    )
    # Invisible bidi controls in caller text are shown as their code points, and caller text is
    # isolated from its neighbours: "invoice\u202egnp.exe" does not read as "invoiceexe.png"
    # (found by the attack of 2026-12-03, round 4).
    bidi = "bidi:check"
    spoof = lease_op(url, API_KEY, {"op": "acquire", "tenantId": tenant, "resource": bidi, "holder": "invoice\u202egnp.exe", "ttlSeconds": 60})
    page.wait(lambda: page.holders(bidi) == ["invoice[U+202E]gnp.exe"], "the bidi control shown as its code point")
    holder_el = page.card(bidi).find_element(By.CSS_SELECTOR, ".permit .holder")
    assert holder_el.value_of_css_property("unicode-bidi") == "isolate"
    # What a screen reader says of the row's revoke button is shown the same way (it was raw:
    # the attack of 2026-12-05).
    labels = [b.get_attribute("aria-label") for b in page.card(bidi).find_elements(By.CSS_SELECTOR, ".permit button")]
    assert labels and all("invoice[U+202E]gnp.exe" in label and "\u202e" not in label for label in labels), labels
    lease_op(url, API_KEY, {"op": "release", "tenantId": tenant, "resource": bidi, "holder": "invoice\u202egnp.exe", "token": spoof["fencingToken"]})
    page.wait(lambda: page.card(bidi) is None, "the bidi lease gone on release")
    card = page.card(resource)
    assert card.find_element(By.CSS_SELECTOR, ".token").get_property("textContent") == str(held["fencingToken"])
    assert card.find_elements(By.TAG_NAME, "img") == [], "the holder became an element"
    page.assert_not_pwned()
    # The expiry counts down in seconds, every second.
    expires = card.find_element(By.CSS_SELECTOR, ".expires")
    first = expires.get_property("textContent")
    # Under a minute, whole seconds; at a minute, "1 min".
    def left(text):
        return 60 if text == "1 min" else int(text.removesuffix(" s"))

    assert first == "1 min" or (first.endswith(" s") and 50 <= left(first) <= 59), first
    page.wait(lambda: expires.get_property("textContent") != first, "the countdown to tick", timeout=3)
    assert left(expires.get_property("textContent")) < left(first)

    # 3. The wide page, for the docs; then a phone's width: nothing wider than the screen.
    wide(browser)
    time.sleep(0.3)
    os.makedirs(os.path.dirname(SCREENSHOT), exist_ok=True)
    assert browser.save_screenshot(SCREENSHOT)
    phone(browser)
    page.wait(lambda: page.js("return window.innerWidth") == 390, "the phone's width")
    overflow = page.js("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert overflow[0] <= overflow[1] + 1, f"the page is wider than a phone: {overflow}"
    cut = page.js(
        "return [...document.querySelectorAll('button, input')].filter(e => e.getClientRects().length)"
        ".filter(e => { const r = e.getBoundingClientRect(); return r.left < 0 || r.right > window.innerWidth + 1; })"
        ".map(e => e.id || e.className || e.textContent)"
    )
    assert cut == [], f"controls cut off at 390 px: {cut}"
    wide(browser)

    # 4. Released by its holder: it leaves the page.
    released = lease_op(
        url, API_KEY, {"op": "release", "tenantId": tenant, "resource": resource, "holder": HOSTILE_HOLDER, "token": held["fencingToken"]}
    )
    assert released["granted"] is True
    page.wait(lambda: page.card(resource) is None, "the released lease to leave the page")

    # 5. Taken again; the plain key is not offered a revoke it could only be refused (its audit
    # was refused: no admin role), on a permit or on the whole lease.
    held = lease_op(url, API_KEY, acquire)
    assert held["granted"] is True
    page.wait(lambda: page.holders(resource) == [HOSTILE_HOLDER], "the lease taken again")
    page.wait(lambda: "no admin role" in (page.text("#audit-notice") or ""), "the audit refused")
    card = page.card(resource)
    assert page.visible_buttons("Revoke", card) == [], "a Revoke button for a key that may not revoke"
    assert page.visible_buttons("Revoke all", card) == [], "a Revoke all button for a key that may not revoke"
    assert page.js("return document.body.dataset.admin") == "no"

    # 6. Signed out (the tab forgets the key), in again with the admin key: the revoke ends it.
    page.sign_out()
    assert page.js("return sessionStorage.length") == 0, "sign-out clears the key and tenant"
    page.sign_in(ADMIN_KEY, tenant)
    page.wait(lambda: page.holders(resource) == [HOSTILE_HOLDER], "the lease, seen with the admin key")
    # The status line that says what was revoked names the holder as every caller text is
    # shown: a bidi control as its code point (it was set raw until 2026-12-05).
    spoofer = "invoice\u202egnp.exe"
    lease_op(url, API_KEY, {"op": "acquire", "tenantId": tenant, "resource": bidi, "holder": spoofer, "ttlSeconds": 60})
    page.revoke(bidi, "invoice[U+202E]gnp.exe", "a spoofed name")
    page.wait(lambda: "invoice[U+202E]gnp.exe #" in (page.text("#status") or ""), "the revoked holder, shown")
    assert "\u202e" not in page.text("#status")
    # A permit in a session: its row names the session, and "Revoke session" ends the session
    # and every permit in it (on another resource too).
    session = lease_op(url, API_KEY, {"op": "open", "tenantId": tenant, "holder": "agent-3", "ttlSeconds": 600})["session"]["id"]
    for job in ("job:a", "job:b"):
        lease_op(url, API_KEY, {"op": "acquire", "tenantId": tenant, "resource": job, "holder": "agent-3", "session": session,
                                **({"value": HOSTILE_VALUE} if job == "job:a" else {})})
    card = page.wait(lambda: page.card("job:a"), "the session's permit on the page")
    row = card.find_element(By.CSS_SELECTOR, ".permit")
    assert row.find_element(By.CSS_SELECTOR, ".session").get_property("textContent") == session
    # The permit's value (its holder's note) is shown in its row, as text.
    assert row.find_element(By.CSS_SELECTOR, ".value").get_property("textContent") == HOSTILE_VALUE
    other = page.wait(lambda: page.card("job:b"), "the other permit on the page")
    assert other.find_element(By.CSS_SELECTOR, ".cell-value").get_property("textContent") == "none"
    page.wait(lambda: page.visible_buttons("Revoke session", row), "the Revoke session button")
    page.button("Revoke session", within=row).click()
    dialog = browser.find_element(By.ID, "revoke-dialog")
    page.wait(lambda: dialog.is_displayed(), "the revoke dialog")
    assert session in dialog.get_property("textContent")
    page.by_label("Reason").send_keys("agent-3 is stuck")
    page.button("Confirm revoke", within=dialog).click()
    page.wait(lambda: page.card("job:a") is None and page.card("job:b") is None, "both of the session's leases gone")
    assert lease_op(url, API_KEY, {"op": "get", "tenantId": tenant, "session": session})["session"] is None
    page.wait(
        lambda: any(e.get_property("textContent") == "session " + session
                    for e in browser.find_elements(By.CSS_SELECTOR, "#audit .entry-resource")),
        "the session's revoke in the audit feed, by its session",
    )

    page.revoke(resource, HOSTILE_HOLDER, HOSTILE_REASON)
    page.wait(lambda: page.card(resource) is None, "the revoked lease to leave the page")
    got = lease_op(url, API_KEY, {"op": "get", "tenantId": tenant, "resource": resource})
    assert got["granted"] is False, got

    def audited():
        for entry in browser.find_elements(By.CSS_SELECTOR, "#audit .entry"):
            if entry.find_element(By.CSS_SELECTOR, ".entry-resource").get_property("textContent") == resource:
                return entry
        return None

    entry = page.wait(audited, "the revoke in the audit feed")
    assert entry.find_element(By.CSS_SELECTOR, ".reason").get_property("textContent") == HOSTILE_REASON
    ended = entry.find_element(By.CSS_SELECTOR, ".ended .holder").get_property("textContent")
    assert ended == HOSTILE_HOLDER
    assert f"#{held['fencingToken']}" in entry.find_element(By.CSS_SELECTOR, ".ended").get_property("textContent")
    assert entry.find_element(By.CSS_SELECTOR, ".actor").get_property("textContent").strip() != ""
    page.assert_not_pwned()
    page.assert_no_csp_violation()

    # 8. The docs page, for the README: its commands and JSON are set as code blocks.
    wide(browser)
    browser.get(console + "/docs/lease/")
    blocks = browser.find_elements(By.CSS_SELECTOR, "pre > code")
    assert len(blocks) >= 5, "the docs page sets its commands as code blocks"
    assert any(b.get_property("textContent").startswith("curl ") for b in blocks)
    # The top: the title and the contents, which link every section.
    contents = browser.find_elements(By.CSS_SELECTOR, "nav li a")
    assert len(contents) >= 20 and contents[0].get_attribute("href").endswith("#what")
    assert browser.save_screenshot(DOCS_SCREENSHOT)


def test_console_shows_a_finished_resource_and_an_admin_reopens_it(console, browser):
    """A done release (docs/adr/0012) shows on its card: who finished it and its result, as
    text; the admin's Reopen ends the mark (audited: the entry says what it reopened), and the
    resource can be acquired again with the next token."""
    url, tenant, resource = console, "acme-work", "task:42"
    held = lease_op(url, API_KEY, {"op": "acquire", "tenantId": tenant, "resource": resource,
                                   "holder": HOSTILE_HOLDER, "ttlSeconds": 60})
    finished = lease_op(url, API_KEY, {"op": "release", "tenantId": tenant, "resource": resource,
                                       "holder": HOSTILE_HOLDER, "token": held["fencingToken"], "done": True,
                                       "result": HOSTILE_VALUE})
    assert finished["done"]["result"] == HOSTILE_VALUE, finished
    page = Console(browser, url)
    wide(browser)
    page.open()
    page.js("sessionStorage.clear()")  # whoever an earlier test signed in as
    page.open()
    page.sign_in(ADMIN_KEY, tenant)
    card = page.wait(lambda: page.card(resource), f"{resource} on the page")
    line = card.find_element(By.CSS_SELECTOR, ".finished-text").get_property("textContent")
    assert line == f"Finished by {HOSTILE_HOLDER} (token {held['fencingToken']}): {HOSTILE_VALUE}", line
    page.wait(lambda: page.visible_buttons("Reopen", card), "the Reopen button (an admin's)")
    page.button("Reopen", within=card).click()
    dialog = browser.find_element(By.ID, "revoke-dialog")
    page.wait(lambda: dialog.is_displayed(), "the reopen dialog")
    reason = page.by_label("Reason")
    reason.clear()
    reason.send_keys("the invoice bounced")
    page.button("Confirm reopen", within=dialog).click()
    page.wait(lambda: page.card(resource) is None, "the reopened resource to leave the page")
    again = lease_op(url, API_KEY, {"op": "acquire", "tenantId": tenant, "resource": resource, "holder": "w2"})
    assert again["granted"] and again["fencingToken"] == held["fencingToken"] + 1, again

    def reopened():
        for entry in browser.find_elements(By.CSS_SELECTOR, "#audit .entry"):
            if entry.find_elements(By.CSS_SELECTOR, ".reopened"):
                return entry
        return None

    entry = page.wait(reopened, "the reopen in the audit feed")
    assert entry.find_element(By.CSS_SELECTOR, ".reopened").get_property("textContent").startswith(
        f"Finished by {HOSTILE_HOLDER}")
    page.assert_not_pwned()
    page.assert_no_csp_violation()
    page.sign_out()


def test_the_root_page_links_every_place_in_a_real_browser(console, browser):
    """GET / as a person opens it: every GET place is a link that works, the rest named."""
    wide(browser)
    browser.get(console + "/")
    assert browser.title == "leasekit"
    links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "li a")]
    for path in ("/docs/lease/", "/console/", "/openapi.json", "/api/v1/catalog", "/healthz"):
        assert console + path in links, (path, links)
    named = browser.find_element(By.TAG_NAME, "ul").get_property("textContent")
    assert "POST /api/v1/lease" in named and "POST /mcp" in named, named
    # The docs link leads to the docs page.
    browser.find_element(By.CSS_SELECTOR, f'a[href="{console}/docs/lease/"]').click()
    assert browser.find_elements(By.CSS_SELECTOR, "pre > code"), "the docs page after the click"
    browser.get(console + "/")
    assert browser.save_screenshot(os.path.join(SCREENSHOTS, "root-page.png"))


class Markup(HTMLParser):
    """What index.html carries that a CSP of 'self' would block or that runs caller text."""

    def __init__(self):
        super().__init__()
        self.problems = []
        self.scripts = []
        self.labels = {}
        self.ids = set()
        self.in_script = False

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "style" or name.startswith("on"):
                self.problems.append(f"<{tag} {name}=...>")
            if name == "id":
                self.ids.add(value)
            if name in ("href", "src", "action") and value and value.split(":")[0].lower() in ("javascript", "data"):
                self.problems.append(f"<{tag} {name}={value}>")
        if tag == "style":
            self.problems.append("<style> element")
        if tag == "script":
            self.in_script = True
            self.scripts.append((dict(attrs).get("type"), dict(attrs).get("src")))
        if tag == "label":
            self.labels.setdefault(dict(attrs).get("for"), 0)

    def handle_endtag(self, tag):
        if tag == "script":
            self.in_script = False

    def handle_data(self, data):
        if self.in_script and data.strip():
            self.problems.append(f"inline script: {data.strip()[:40]!r}")


def test_console_is_served_under_a_strict_csp_with_no_inline_code(console):
    with urllib.request.urlopen(console + "/console/", timeout=10) as response:
        assert response.status == 200
        assert response.headers.get_content_type() == "text/html"
        csp = response.headers.get("Content-Security-Policy", "")
        page = response.read().decode()
    assert "script-src 'self'" in csp, csp
    assert "frame-ancestors 'none'" in csp, csp
    markup = Markup()
    markup.feed(page)
    assert markup.problems == [], markup.problems
    # One script, the entry module; it imports the others (same origin, so 'self' allows them).
    assert markup.scripts == [("module", "console.js")], markup.scripts
    # The served page is the one in the repository, and so is each file it loads.
    with open(os.path.join(CONSOLE_DIR, "index.html"), encoding="utf-8") as f:
        assert f.read() == page
    modules = sorted(name for name in os.listdir(CONSOLE_DIR) if name.endswith(".js"))
    assert "console.js" in modules, modules
    for name in ["console.css", *modules]:
        with urllib.request.urlopen(f"{console}/console/{name}", timeout=10) as response:
            assert response.status == 200
            if name.endswith(".js"):
                assert response.headers.get_content_type() == "text/javascript", name
            with open(os.path.join(CONSOLE_DIR, name), encoding="utf-8") as f:
                assert response.read().decode() == f.read(), name
    # Caller text never goes through an HTML parser, in any module.
    for name in modules:
        with open(os.path.join(CONSOLE_DIR, name), encoding="utf-8") as f:
            source = f.read()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage", "import("):
            assert sink not in source, f"{name} uses {sink}"
