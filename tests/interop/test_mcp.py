"""Interop: the official MCP Python client (PyPI `mcp`) lists leasekit's tools and calls acquire
then get over streamable HTTP, with the current protocol (2026-07-28, stateless, discover) and
the previous one (the initialize handshake); answers carry the same data and _provenance. A wallet
with no API key pays per tool call over the x402 MCP binding, with the official x402 SDK."""

import asyncio

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from eth_account import Account
from x402 import x402Client
from x402.mcp.types import MCPToolResult
from x402.mcp.utils import attach_payment_to_meta, extract_payment_required_from_result, extract_payment_response_from_meta
from x402.mechanisms.evm.exact.register import register_exact_evm_client

from conftest import ADMIN_KEY, API_KEY, needs_own_server, unique
from verifier import verify


def client(server, mode, key=API_KEY):
    headers = {"X-API-KEY": key} if key else {}
    transport = streamable_http_client(server + "/mcp", http_client=create_mcp_http_client(headers=headers))
    return Client(transport, mode=mode)


async def acquire_then_get(server, mode, resource):
    tenant = unique("mcp")
    async with client(server, mode) as c:
        tools = await c.list_tools()
        names = sorted(t.name for t in tools.tools)
        assert names == ["claim_free", "lease", "lease_audit", "lease_list", "lease_read", "lease_revoke"]
        lease_tool = next(t for t in tools.tools if t.name == "lease")
        assert lease_tool.input_schema["properties"]["op"]["enum"] == ["acquire", "renew", "release", "get", "check", "open", "keepalive", "close"]
        acquired = await c.call_tool("lease", {"op": "acquire", "resource": resource, "holder": "agent-1", "tenantId": tenant})
        assert not acquired.is_error, acquired
        got = await c.call_tool("lease", {"op": "get", "resource": resource, "tenantId": tenant})
        bad = await c.call_tool("lease", {"op": "acquire", "resource": resource, "tenantId": tenant})
        claimed = await c.call_tool("claim_free", {"key": resource, "holder": "agent-1"})
        return acquired.structured_content, got.structured_content, bad, claimed.structured_content


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_official_client_acquires_and_gets(server, mode):
    # Fresh names: a claim is the account's and a lease the tenant's, on a store that may be reused.
    resource = unique(f"mcp:{mode}")
    acquired, got, bad, claimed = asyncio.run(acquire_then_get(server, mode, resource))
    assert acquired["data"]["granted"] is True and acquired["data"]["fencingToken"] == 1
    assert got["data"]["holder"] == "agent-1" and got["data"]["fencingToken"] == 1
    # The same signed answers as over HTTP, verifiable offline.
    import json, urllib.request

    did = json.loads(urllib.request.urlopen(server + "/.well-known/did.json", timeout=10).read())["id"]
    assert verify(acquired, did) == [] and verify(got, did) == []
    # Invalid input: a tool error the model can read, naming the field.
    assert bad.is_error
    assert bad.structured_content["code"] == "INVALID_INPUT"
    assert bad.structured_content["witnesses"][0]["path"] == "/holder"
    assert claimed["outcome"] == "acquired" and claimed["plan"] == "free"


async def list_tools(server):
    async with client(server, "auto") as c:
        return (await c.list_tools()).tools


async def semaphore_and_check(server, resource):
    tenant = unique("mcp-sem")
    async with client(server, "auto") as c:
        call = lambda tool, args: c.call_tool(tool, {"resource": resource, "tenantId": tenant, **args})
        first = await call("lease", {"op": "acquire", "holder": "agent-1", "limit": 2})
        second = await call("lease", {"op": "acquire", "holder": "agent-2", "limit": 2})
        third = await call("lease", {"op": "acquire", "holder": "agent-3", "limit": 2})
        # The lease tool waits as the route does: a 1 s wait behind the full semaphore ends with
        # the place.
        waited = await call("lease", {"op": "acquire", "holder": "agent-5", "limit": 2, "waitSeconds": 1})
        current = await call("lease_read", {"op": "check", "token": 2, "holder": "agent-2"})
        stale = await call("lease_read", {"op": "check", "token": 3})
        got = await call("lease_read", {"op": "get"})
        # The read-only tool offers no mutation: neither an op that writes nor a field only
        # mutations take.
        refused = [
            await call("lease_read", {"op": "acquire", "holder": "agent-4"}),
            await call("lease_read", {"op": "release", "holder": "agent-1", "token": 1}),
            await call("lease_read", {"op": "get", "limit": 2}),
            await call("lease_read", {"op": "get", "requestId": "x"}),
            await call("lease_read", {"op": "get", "waitSeconds": 1}),
        ]
        after = await call("lease_read", {"op": "get"})
        return first, second, third, waited, current, stale, got, refused, after


def test_a_semaphore_over_mcp_and_a_check_with_the_read_only_tool(server):
    resource = unique("mcp:sem")
    first, second, third, waited, current, stale, got, refused, after = asyncio.run(
        semaphore_and_check(server, resource))
    waited = waited.structured_content["data"]
    assert (waited["granted"], waited["queuePosition"]) == (False, 1), waited
    assert [r.structured_content["data"]["fencingToken"] for r in (first, second)] == [1, 2]
    assert third.structured_content["data"]["witnesses"][0]["ruleId"] == "LEASE_HELD"
    assert current.structured_content["data"]["current"] is True
    assert stale.structured_content["data"]["current"] is False
    assert stale.structured_content["data"]["witnesses"][0]["ruleId"] == "TOKEN_NOT_CURRENT"
    assert [h["holder"] for h in got.structured_content["data"]["holders"]] == ["agent-1", "agent-2"]
    assert got.structured_content["data"]["limit"] == 2
    for r in refused:
        assert r.is_error and r.structured_content["code"] == "INVALID_INPUT", r.structured_content
    assert after.structured_content["data"]["holders"] == got.structured_content["data"]["holders"]


async def a_session_over_mcp(server):
    tenant = unique("mcp-session")
    async with client(server, "auto") as c:
        call = lambda tool, args: c.call_tool(tool, {"tenantId": tenant, **args})
        opened = (await call("lease", {"op": "open", "holder": "agent-1", "ttlSeconds": 60})).structured_content["data"]
        session = opened["session"]["id"]
        held = await call("lease", {"op": "acquire", "resource": "mcp:job", "holder": "agent-1", "session": session})
        read = await call("lease_read", {"op": "get", "session": session})
        kept = await call("lease", {"op": "keepalive", "session": session, "holder": "agent-1"})
        closed = await call("lease", {"op": "close", "session": session, "holder": "agent-1"})
        after = await call("lease_read", {"op": "get", "resource": "mcp:job"})
        return held, read, kept, closed, after


def test_a_session_over_mcp_with_its_read_in_the_read_only_tool(server):
    held, read, kept, closed, after = asyncio.run(a_session_over_mcp(server))
    held = held.structured_content["data"]
    assert held["granted"] is True and held["holders"][0]["session"] is not None
    read = read.structured_content["data"]
    assert [l["resource"] for l in read["session"]["leases"]] == ["mcp:job"]
    assert kept.structured_content["data"]["granted"] is True
    assert closed.structured_content["data"]["session"] is None
    assert after.structured_content["data"]["granted"] is False


def test_tools_declare_true_annotations_and_the_rest_schemas(server):
    """Annotations say what the tools do; input and output schemas are the REST API's own (so
    the official client's check of structuredContent against outputSchema, which every
    call_tool above ran, holds the answers to the published shapes)."""
    import json, urllib.request

    tools = {t.name: t for t in asyncio.run(list_tools(server))}
    for tool in tools.values():
        a = tool.annotations
        hints = (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
        ops = tool.input_schema.get("properties", {}).get("op", {}).get("enum")
        if tool.name in ("lease_read", "lease_list", "lease_audit"):
            # Reads only: changes nothing, the same call answers the same.
            assert hints == (True, False, True, False), tool.name
            assert ops == {"lease_read": ["get", "check", "watch"], "lease_list": ["list"], "lease_audit": ["audit"]}[tool.name]
            assert not {"ttlSeconds", "limit", "requestId", "reason"} & set(tool.input_schema["properties"])
        elif tool.name == "lease_revoke":
            # Ends another holder's permit, or a finished mark (reopen): destructive, and not
            # idempotent without a requestId.
            assert hints == (False, True, False, False), tool.name
            assert ops == ["revoke", "reopen"] and "reason" in tool.input_schema["properties"], tool.input_schema
        else:
            # These change state (a lease, a hold, the free quota), destroy nothing of anyone
            # else's, are not idempotent without a requestId, and touch nothing but this service.
            assert hints == (False, False, False, False), tool.name
        assert a.title
    api = json.loads(urllib.request.urlopen(server + "/openapi.json", timeout=10).read())["components"]["schemas"]

    def without_meta(schema):
        return {k: v for k, v in schema.items() if k != "$schema"}

    # Each lease tool's input lists the REST request's own fields (those its ops take), each with
    # the REST type and bounds and a line of its own; the rules between fields stay the server's.
    rest = without_meta(api["LeaseRequest"])
    kept = ("type", "enum", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern")
    for name in ("lease", "lease_read", "lease_list", "lease_audit", "lease_revoke"):
        schema = tools[name].input_schema
        assert schema["additionalProperties"] is False and schema["required"] == rest["required"], name
        for field, compact in schema["properties"].items():
            assert field in rest["properties"], (name, field)
            published = rest["properties"][field]
            assert {k: compact[k] for k in kept if k in compact and k != "enum"} == {
                k: published[k] for k in kept if k in published and k != "enum"}, (name, field)
            assert field == "op" or compact.get("description"), (name, field)
    lease_input = tools["lease"].input_schema
    assert lease_input["properties"]["op"]["enum"] == ["acquire", "renew", "release", "get", "check", "open", "keepalive", "close"]
    assert not {"reason", "cursor", "pageSize", "prefix"} & set(lease_input["properties"])
    # Outputs: the answer's two parts (every field of data is LeaseAnswer's, which the answers
    # above were checked against over REST: test_discovery.py).
    for name in ("lease", "lease_read", "lease_list", "lease_audit", "lease_revoke"):
        assert tools[name].output_schema["required"] == ["data", "_provenance"], name
    assert without_meta(tools["claim_free"].input_schema) == without_meta(api["ClaimFreeRequest"])
    assert without_meta(tools["claim_free"].output_schema) == without_meta(api["ClaimAnswer"])


def mcp_post(server, message):
    """One JSON-RPC message to /mcp with the API key, as raw bytes: (answer bytes, answer JSON)."""
    import json, urllib.request

    request = urllib.request.Request(
        server + "/mcp",
        data=json.dumps(message).encode(),
        headers={"X-API-KEY": API_KEY, "Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"},
    )
    raw = urllib.request.urlopen(request, timeout=10).read()
    return raw, json.loads(raw)


def test_tools_list_and_a_tool_result_fit_an_agents_context(server):
    """What an agent pays in context for the tools and for one answer: tools/list was 69,756
    bytes (each lease tool carried the whole request schema's rules and the 8 kB answer schema)
    and a tool result 5,288 (the signed answer twice, as structuredContent and as text)."""
    listed, _ = mcp_post(server, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    tenant = unique("mcp-size")
    called, answer = mcp_post(server, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "lease", "arguments": {"op": "acquire", "resource": "size", "holder": "agent-1", "tenantId": tenant}}})
    print(f"\ntools/list: {len(listed):,} bytes; a lease tool result: {len(called):,} bytes")
    assert len(listed) < 12_000, len(listed)
    assert len(called) < 4_000, len(called)
    result = answer["result"]
    # The text is the answer's data, once; the signed answer is the structured content.
    import json

    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]["data"]
    assert result["structuredContent"]["data"]["granted"] is True and "_provenance" in result["structuredContent"]


def as_x402_result(result):
    """The official MCP client's result in the form the official x402 SDK's MCP helpers read."""
    content = [block.model_dump(by_alias=True) for block in result.content]
    return MCPToolResult(content=content, is_error=bool(result.is_error), meta=result.meta or {}, structured_content=result.structured_content)


async def paid_calls(server, mode, resource, payer):
    payments = x402Client()
    register_exact_evm_client(payments, payer)
    async with client(server, mode, key=None) as c:
        # No API key: the tools are listed all the same.
        assert sorted(t.name for t in (await c.list_tools()).tools) == ["claim_free", "lease", "lease_audit", "lease_list", "lease_read", "lease_revoke"]
        arguments = {"op": "acquire", "resource": resource, "holder": "agent-1"}
        offer = as_x402_result(await c.call_tool("lease", arguments))
        required = extract_payment_required_from_result(offer)
        assert required is not None, offer.structured_content
        assert required.accepts[0].amount == "5000"
        assert "payment-identifier" in required.extensions
        payload = await payments.create_payment_payload(required)
        params = attach_payment_to_meta({}, payload)
        paid = await c.call_tool("lease", arguments, meta=params["_meta"])
        settlement = extract_payment_response_from_meta(as_x402_result(paid))
        # The same payment again, sent by hand: refused (it has no payment identifier).
        again = await c.call_tool("lease", arguments, meta=params["_meta"])
        free = await c.call_tool("claim_free", {"key": resource, "holder": "agent-1"})
        # A paid read through the read-only tool: its own offer, its own payment.
        check = {"op": "check", "resource": resource, "token": 1, "holder": "agent-1"}
        offer = as_x402_result(await c.call_tool("lease_read", check))
        required = extract_payment_required_from_result(offer)
        assert required is not None, offer.structured_content
        payload = await payments.create_payment_payload(required)
        checked = await c.call_tool("lease_read", check, meta=attach_payment_to_meta({}, payload)["_meta"])
        # The wallet is its own tenant's operator: a paid revoke of its lease, and the audit of it.
        admin = {}
        for tool, arguments in [
            ("lease_revoke", {"op": "revoke", "resource": resource, "holder": "agent-1", "reason": "paid: ends its own"}),
            ("lease_audit", {"op": "audit", "resource": resource}),
        ]:
            offer = as_x402_result(await c.call_tool(tool, arguments))
            required = extract_payment_required_from_result(offer)
            assert required is not None, (tool, offer.structured_content)
            payload = await payments.create_payment_payload(required)
            admin[tool] = await c.call_tool(tool, arguments, meta=attach_payment_to_meta({}, payload)["_meta"])
        return paid, settlement, again, free, checked, admin


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_wallet_without_a_key_pays_per_tool_call(server, mode):
    payer = Account.create()
    resource = unique(f"mcp-paid:{mode}")
    paid, settlement, again, free, checked, admin = asyncio.run(paid_calls(server, mode, resource, payer))
    revoked, audit = admin["lease_revoke"], admin["lease_audit"]
    assert not revoked.is_error, revoked.structured_content
    assert [(h["holder"], h["fencingToken"]) for h in revoked.structured_content["data"]["revoked"]] == [("agent-1", 1)]
    assert not audit.is_error, audit.structured_content
    entries = audit.structured_content["data"]["entries"]
    assert [(e["resource"], e["reason"]) for e in entries] == [(resource, "paid: ends its own")], entries
    assert payer.address.lower() in entries[0]["actor"].lower(), entries[0]
    assert not checked.is_error, checked.structured_content
    assert checked.structured_content["data"]["current"] is True
    assert not paid.is_error, paid.structured_content
    data = paid.structured_content["data"]
    assert data["granted"] is True and data["fencingToken"] == 1
    assert settlement is not None and settlement.success, settlement
    assert settlement.payer == payer.address.lower()
    import json, urllib.request

    did = json.loads(urllib.request.urlopen(server + "/.well-known/did.json", timeout=10).read())["id"]
    assert verify(paid.structured_content, did) == []
    assert again.is_error and "used before" in again.structured_content["error"], again.structured_content
    assert free.is_error and free.structured_content["code"] == "UNAUTHORIZED"


async def list_revoke_audit(server, resource):
    tenant = unique("mcp-admin")
    async with client(server, "auto") as plain, client(server, "auto", key=ADMIN_KEY) as admin:
        call = lambda c, tool, args: c.call_tool(tool, {"tenantId": tenant, **args})
        await call(plain, "lease", {"op": "acquire", "resource": resource, "holder": "agent-1"})
        listed = await call(plain, "lease_list", {"op": "list"})
        forbidden = await call(plain, "lease_revoke", {"op": "revoke", "resource": resource, "reason": "no role"})
        not_here = await call(admin, "lease", {"op": "revoke", "resource": resource, "reason": "wrong tool"})
        revoked = await call(admin, "lease_revoke", {"op": "revoke", "resource": resource, "reason": "wedged"})
        audit = await call(admin, "lease_audit", {"op": "audit"})
        audit_forbidden = await call(plain, "lease_audit", {"op": "audit"})
        return listed, forbidden, not_here, revoked, audit, audit_forbidden


def test_list_revoke_and_audit_over_mcp(server):
    needs_own_server("an API key with the admin role")
    resource = unique("mcp:admin")
    listed, forbidden, not_here, revoked, audit, audit_forbidden = asyncio.run(list_revoke_audit(server, resource))
    assert [l["resource"] for l in listed.structured_content["data"]["leases"]] == [resource]
    assert forbidden.is_error and forbidden.structured_content["code"] == "FORBIDDEN"
    assert not_here.is_error and not_here.structured_content["code"] == "INVALID_INPUT", "the lease tool does not revoke"
    assert revoked.structured_content["data"]["revoked"][0]["holder"] == "agent-1"
    entry = audit.structured_content["data"]["entries"][0]
    assert (entry["resource"], entry["reason"]) == (resource, "wedged")
    assert audit_forbidden.is_error and audit_forbidden.structured_content["code"] == "FORBIDDEN"


async def watch_and_value(server, resource):
    tenant = unique("mcp-watch")
    async with client(server, "auto") as c:
        call = lambda tool, args: c.call_tool(tool, {"resource": resource, "tenantId": tenant, **args})
        first = await call("lease_read", {"op": "watch"})
        tag = first.structured_content["data"]["stateTag"]
        unchanged = await call("lease_read", {"op": "watch", "stateTag": tag, "waitSeconds": 1})
        # One call after another: `sam local` runs a function's invocations one at a time, so a
        # watch cannot wait there while the acquire it would see runs (the wake-up itself is
        # shared/tests/watch.rs's).
        took = await call("lease", {"op": "acquire", "holder": "leader-1", "value": "10.0.0.7:8080"})
        changed = await call("lease_read", {"op": "watch", "stateTag": tag, "waitSeconds": 10})
        return first, unchanged, took, changed


def test_the_read_tool_watches_and_the_lease_tool_takes_a_value(server):
    """Leader election over MCP: the lease tool's acquire with a value (campaign), the read-only
    tool's watch with the stateTag last seen (observe), answered at once once the holders changed."""
    resource = unique("mcp:leader")
    first, unchanged, took, changed = asyncio.run(watch_and_value(server, resource))
    assert first.structured_content["data"]["changed"] is True
    assert unchanged.structured_content["data"]["changed"] is False
    assert took.structured_content["data"]["value"] == "10.0.0.7:8080"
    data = changed.structured_content["data"]
    assert (data["changed"], data["holder"], data["value"]) == (True, "leader-1", "10.0.0.7:8080")
    assert data["stateTag"] == took.structured_content["data"]["stateTag"]
