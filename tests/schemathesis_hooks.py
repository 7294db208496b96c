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
