"""schemathesis hooks: test as an API-key caller does. API-key callers must send a tenantId (the
contract: their namespace is account + tenantId); the published schema leaves it optional because
paying wallets need none, and no schema can say "required when authenticated by key"."""

import schemathesis


@schemathesis.hook
def map_body(ctx, body):
    operation = ctx.operation
    if operation.path == "/api/v1/lease" and isinstance(body, dict) and "tenantId" not in body:
        body["tenantId"] = "schemathesis"
    return body
