"""Interop: the official MCP Python client (PyPI `mcp`) lists leasekit's tools and calls acquire
then get over streamable HTTP, with the current protocol (2026-07-28, stateless, discover) and
the previous one (the initialize handshake); answers carry the same data and _provenance."""

import asyncio

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import API_KEY, unique
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
        assert names == ["claim_free", "lease"]
        lease_tool = next(t for t in tools.tools if t.name == "lease")
        assert lease_tool.input_schema["properties"]["op"]["enum"] == ["acquire", "renew", "release", "get"]
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
