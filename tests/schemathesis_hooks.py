"""schemathesis hooks: test as an API-key caller does. API-key callers must send a tenantId (the
contract: their namespace is account + tenantId); the published schema leaves it optional because
paying wallets need none, and no schema can say "required when authenticated by key"."""

import schemathesis


@schemathesis.hook
def map_body(ctx, body):
    operation = ctx.operation
    if operation.path == "/api/v1/lease" and isinstance(body, dict) and "tenantId" not in body:
        body["tenantId"] = "schemathesis"
    # The one rule of the lease input JSON Schema cannot say of objects: a set's leases name each
    # resource once (its description says so; the service answers 400 otherwise). A generated
    # set that repeats one gets distinct names, as a caller's would.
    if operation.path == "/api/v1/lease" and isinstance(body, dict) and isinstance(body.get("leases"), list):
        for i, lease in enumerate(body["leases"]):
            if isinstance(lease, dict) and isinstance(lease.get("resource"), str):
                lease["resource"] = f"{lease['resource'][:190]}.{i}"
    # A generated wait behind a held lease would hold the bounded run up to 20 s a call: a second
    # tries the same path.
    if operation.path == "/api/v1/lease" and isinstance(body, dict) and isinstance(body.get("waitSeconds"), int) \
            and not isinstance(body["waitSeconds"], bool) and body["waitSeconds"] > 1:
        body["waitSeconds"] = 1
    # A list or audit cursor is the service's own (MACed, bound to the tenant): no generator can
    # make one, and a made-up one is a 400 by contract (tests/admin_api.rs covers it). Pages are
    # asked for from the start.
    if operation.path == "/api/v1/lease" and isinstance(body, dict):
        body.pop("cursor", None)
    return body


def without_candidates(lease_input):
    """The lease input schema without `candidates` (acquire's claim-next, docs/adr/0012): with the
    one rule that exempts it from `resource` (its first), the generator gives up on the whole
    schema ("does not support this part of it", whatever form the exemption takes), so it fuzzes
    the rest. Candidates are tested by shared/tests/done.rs, tests/http_api.rs (their 400s) and
    tests/interop/test_work.py."""
    properties = lease_input.get("properties", {})
    properties.pop("candidates", None)
    rules = []
    for rule in lease_input.get("allOf", []):
        if "candidates" in rule.get("if", {}).get("required", []):
            continue  # "Only acquire takes candidates"
        if rule.get("if", {}).get("properties") == {"candidates": False}:
            rule = {**rule, "if": {k: v for k, v in rule["if"].items() if k != "properties"}}
        # "One target": the pairs with candidates go.
        alternatives = rule.get("not", {}).get("anyOf")
        if isinstance(alternatives, list):
            kept = [a for a in alternatives if "candidates" not in a.get("required", [])]
            rule = {**rule, "not": {**rule["not"], "anyOf": kept}}
        rules.append(rule)
    lease_input["allOf"] = rules
    return lease_input


@schemathesis.hook
def before_load_schema(context, raw_schema):
    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("properties"), dict) and "candidates" in node["properties"] \
                    and "op" in node["properties"]:
                without_candidates(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(raw_schema)
