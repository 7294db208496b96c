"""The docs page as a guide: every op's command, pasted into bash as the page shows it (with the
README's $URL, $KEY and $ADMIN_KEY), gets the answer the page shows, field for field and in the
same order; times and ids aside. A fresh server of its own, so the page's names are new there."""

import json
import os
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from conftest import BIN, needs_own_server

KEY = "docs-key-0123456789"
ADMIN_KEY = "docs-admin-key-0123456789"
#: What may differ from the page: when, and the ids a store makes (checked for their form).
VARYING = {"expiresAt", "at", "id", "actor", "until", "stateTag"}
# A state tag is MACed with the server's own key: the page's example comes from another.
FORMS = {"id": r"[0-9a-f]{32}|[a-z2-7]{26}", "actor": r"key:[0-9a-f]{16}", "stateTag": r"[0-9a-f]{24}"}
#: The session id the page's session examples name: the open's real one takes its place.
PAGE_SESSION = "k7f3q2m5x4w4c2b6n2p5r7t3ya"


def same(got, shown, where="data"):
    """`got` has `shown`'s fields in its order and its values, but for VARYING ones."""
    if isinstance(shown, dict):
        assert isinstance(got, dict) and list(got) == list(shown), f"{where}: {list(got)} != {list(shown)}"
        for field in shown:
            if field not in VARYING:
                same(got[field], shown[field], f"{where}.{field}")
            elif field in FORMS:
                for value in (got[field], shown[field]):
                    assert re.fullmatch(FORMS[field], value), f"{where}.{field}: {value!r}"
    elif isinstance(shown, list):
        assert isinstance(got, list) and len(got) == len(shown), f"{where}: {got} != {shown}"
        for i, (g, s) in enumerate(zip(got, shown)):
            same(g, s, f"{where}[{i}]")
    else:
        assert got == shown, f"{where}: {got!r} != {shown!r}"


def test_every_op_on_the_docs_page_answers_as_the_page_shows():
    needs_own_server("a store where the page's names are new")
    workdir = tempfile.mkdtemp(prefix="docs-")
    server = subprocess.Popen(
        [BIN, "serve", "--addr", "127.0.0.1:0", "--data-dir", workdir,
         "--api-key", f"docs:{KEY}", "--admin-key", f"docs:{ADMIN_KEY}"],
        stdout=subprocess.PIPE, env={**os.environ, "RUST_LOG": "error"}, text=True,
    )
    try:
        url = server.stdout.readline().strip()
        with urllib.request.urlopen(url + "/docs/lease.json", timeout=10) as response:
            page = json.loads(response.read())
        ops = [s for s in page["sections"] if s["id"].startswith("op-")]
        assert [s["title"] for s in ops] == [
            "acquire", "acquire, refused", "renew", "get", "check", "list", "revoke", "audit",
            "acquire, after the revoke", "release", "open", "acquire, in a session", "keepalive", "close"]
        env = {**os.environ, "URL": url, "KEY": KEY, "ADMIN_KEY": ADMIN_KEY}

        def paste(command):
            run = subprocess.run(["bash", "-euo", "pipefail", "-c", command], capture_output=True,
                                 text=True, timeout=30, env=env)
            assert run.returncode == 0, run.stderr
            return json.loads(run.stdout)

        for section in ops:
            says, command, shown = section["paragraphs"]
            assert command.startswith('curl -s "$URL/api/v1/lease?signed=false"'), command
            if section["id"] == "op-list":
                # list reads an index: advisory, a grant shows within about 2 s.
                deadline = time.monotonic() + 3
                while paste(command)["data"]["leases"] == [] and time.monotonic() < deadline:
                    time.sleep(0.1)
            if section["id"] == "op-open":
                got = paste(command)
                session = got["data"]["session"]["id"]
                same(got, json.loads(shown))
                continue
            if PAGE_SESSION in command:
                command = command.replace(PAGE_SESSION, session)
                shown = shown.replace(PAGE_SESSION, session)
            same(paste(command), json.loads(shown))
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_docs_page_has_contents_and_reference_tables():
    needs_own_server("the page of a server of its own")
    workdir = tempfile.mkdtemp(prefix="docs-")
    server = subprocess.Popen([BIN, "serve", "--addr", "127.0.0.1:0", "--data-dir", workdir, "--api-key", f"docs:{KEY}"],
                              stdout=subprocess.PIPE, env={**os.environ, "RUST_LOG": "error"}, text=True)
    try:
        url = server.stdout.readline().strip()
        with urllib.request.urlopen(url + "/docs/lease/", timeout=10) as response:
            html = response.read().decode()
        with urllib.request.urlopen(url + "/docs/lease.json", timeout=10) as response:
            page = json.loads(response.read())
        # Contents: a link to every section, in order.
        for section in page["sections"]:
            assert f'<li><a href="#{section["id"]}">' in html and f'<h2 id="{section["id"]}">' in html
        tables = {s["id"]: s["table"] for s in page["sections"] if "table" in s}
        fields = [row[0] for row in tables["fields"]["rows"]]
        for field in ("status", "granted", "holder, fencingToken, expiresAt", "nextCursor", "witnesses"):
            assert field in fields
        codes = " ".join(row[1] for row in tables["errors"]["rows"])
        for code in ("INVALID_INPUT", "INVALID_REQUEST", "UNAUTHORIZED", "FORBIDDEN", "IDEMPOTENCY_CONFLICT",
                     "RATE_LIMITED", "STORE_UNAVAILABLE", "INTERNAL_ERROR"):
            assert code in codes
        assert html.count("<table>") == 2
        # The table says what the route answers: any content type is taken (the attack of the
        # third session of 2026-12-05 found a 415 row the route never answers, and no 405).
        rows = {(row[0], row[1]) for row in tables["errors"]["rows"]}
        assert ("405", "METHOD_NOT_ALLOWED") in rows and not any(r[0] == "415" for r in rows)
        request = urllib.request.Request(url + "/api/v1/lease", method="GET")
        try:
            urllib.request.urlopen(request, timeout=10)
            raise AssertionError("GET /api/v1/lease answered 2xx")
        except urllib.error.HTTPError as error:
            assert (error.code, json.loads(error.read())["code"]) == (405, "METHOD_NOT_ALLOWED")
        body = json.dumps({"op": "get", "tenantId": "t", "resource": "r"}).encode()
        request = urllib.request.Request(url + "/api/v1/lease", data=body, method="POST",
                                         headers={"content-type": "text/plain", "x-api-key": KEY})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
    finally:
        server.terminate()
        server.wait(timeout=10)
