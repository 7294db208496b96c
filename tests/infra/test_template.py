"""Facts about infra/template.yaml that a deployment relies on (cfn-lint checks the syntax and
the SAM transform; this checks our own rules)."""

import os
import tomllib

from cfnlint.decode import decode

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TEMPLATE, MATCHES = decode(os.path.join(ROOT, "infra", "template.yaml"))
RESOURCES = TEMPLATE["Resources"]


def of_type(kind):
    return {name: r for name, r in RESOURCES.items() if r["Type"] == kind}


FUNCTIONS = of_type("AWS::Serverless::Function")


def test_the_sam_transform_accepts_it():
    # CloudFormation runs this transform on deploy; cfn-lint alone let a rejected template through.
    from sam_transform import main

    assert main(os.path.join(ROOT, "infra", "template.yaml")) == 0


def test_it_parses():
    assert not MATCHES


def test_every_function_binary_is_a_workspace_member():
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        members = {m.split("/")[-1] for m in tomllib.load(f)["workspace"]["members"] if m.startswith("functions/")}
    binaries = {f["Metadata"]["BuildProperties"]["Binary"] for f in FUNCTIONS.values()}
    assert binaries == members == {"lease", "claim", "claim-free", "mcp", "authorizer", "public", "settle-sweeper"}
    for f in FUNCTIONS.values():
        assert f["Metadata"]["BuildMethod"] == "rust-cargolambda"
        # cargo-lambda builds the package at CodeUri: the workspace root's is the CLI, not a function.
        assert f["Properties"]["CodeUri"] == "../functions/" + f["Metadata"]["BuildProperties"]["Binary"]
    globals_ = TEMPLATE["Globals"]["Function"]
    assert globals_["Runtime"] == "provided.al2023" and globals_["Architectures"] == [{"Ref": "Architecture"}]
    architecture = TEMPLATE["Parameters"]["Architecture"]
    assert architecture["Default"] == "arm64" and architecture["AllowedValues"] == ["arm64", "x86_64"]


def api_events():
    for name, f in FUNCTIONS.items():
        for event in f["Properties"].get("Events", {}).values():
            if event["Type"] == "Api":
                yield name, event["Properties"]


def test_the_authorizer_is_the_closed_default_and_no_route_needs_it():
    api = RESOURCES["Api"]["Properties"]
    assert api["Auth"]["DefaultAuthorizer"] == "ApiKeyAuthorizer", "a route without Auth is closed"
    authorizer = api["Auth"]["Authorizers"]["ApiKeyAuthorizer"]
    assert authorizer["Identity"]["Headers"] == ["X-API-KEY"] and authorizer["Identity"]["ReauthorizeEvery"] == 300
    routes = {}
    for function, event in api_events():
        routes[event["Path"]] = event["Auth"]["Authorizer"]
    # Key-or-payment routes (/mcp too: a wallet pays per tool call) and public routes: no gateway
    # authorizer, since a keyless caller must reach the function to be offered a payment; the
    # function checks keys itself.
    assert set(routes.values()) == {"NONE"}
    assert {"/api/v1/lease", "/mcp", "/claim", "/claim/free", "/api/v1/verify-provenance", "/openapi.json"} <= set(routes)


def test_private_endpoints_get_a_vpce_policy():
    api = RESOURCES["Api"]["Properties"]
    assert api["EndpointConfiguration"]["Type"] == {"Ref": "EndpointType"}
    assert TEMPLATE["Parameters"]["EndpointType"]["AllowedValues"] == ["REGIONAL", "PRIVATE"]
    private, public = api["Auth"]["ResourcePolicy"]["CustomStatements"]["Fn::If"][1:]
    assert TEMPLATE["Conditions"]["IsPrivate"] == {"Fn::Equals": [{"Ref": "EndpointType"}, "PRIVATE"]}
    deny = [s for s in private if s["Effect"] == "Deny"]
    assert deny and deny[0]["Condition"]["StringNotEquals"]["aws:SourceVpce"] == {"Ref": "VpcEndpointIds"}
    assert all(s["Effect"] == "Allow" for s in public)


def statements():
    for name, f in FUNCTIONS.items():
        for policy in f["Properties"].get("Policies", []):
            for statement in policy["Statement"]:
                yield name, statement


def test_no_iam_wildcards():
    seen = 0
    for function, statement in statements():
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert all("*" not in a for a in actions), (function, actions)
        resource = statement["Resource"]
        assert resource != "*" and not (isinstance(resource, str) and "*" in resource), (function, resource)
        seen += 1
    assert seen >= 10


def test_tables_are_on_demand_recoverable_protected_and_ttl_where_needed():
    tables = of_type("AWS::DynamoDB::Table")
    assert set(tables) == {"LeasesTable", "RequestsTable", "KeysTable", "PaymentsTable", "ClaimsTable"}
    for name, t in tables.items():
        p = t["Properties"]
        assert p["BillingMode"] == "PAY_PER_REQUEST", name
        assert p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True, name
        assert p["DeletionProtectionEnabled"] == {"Ref": "DeletionProtection"}, name
        assert t["DeletionPolicy"] == "Retain", name
    with_ttl = {n for n, t in tables.items() if "TimeToLiveSpecification" in t["Properties"]}
    assert with_ttl == {"RequestsTable", "ClaimsTable"}, "leases (fencing counters) and the ledger are never expired"


def test_alarms_watch_errors_throttles_and_settlements():
    alarms = of_type("AWS::CloudWatch::Alarm")
    metrics = {a["Properties"].get("MetricName") for a in alarms.values()}
    assert {"5XXError", "SettlementFailed", "SettlementExpired"} <= metrics
    assert any("Metrics" in a["Properties"] for a in alarms.values()), "the throttles alarm"


def test_the_settlement_sweeper_runs_every_minute_alone_with_only_what_it_needs():
    sweeper = FUNCTIONS["SettleSweeperFunction"]["Properties"]
    assert sweeper["Events"]["EveryMinute"] == {"Type": "Schedule", "Properties": {"Schedule": "rate(1 minute)"}}
    assert sweeper["ReservedConcurrentExecutions"] == 1, "two sweeps never settle one payment"
    actions = {a for s in sweeper["Policies"][0]["Statement"] for a in s["Action"]}
    assert actions == {"dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:GetItem"}, "no secret, no writes elsewhere"
    index = RESOURCES["PaymentsTable"]["Properties"]["GlobalSecondaryIndexes"][0]
    assert index["IndexName"] == "pending"
    assert [k["AttributeName"] for k in index["KeySchema"]] == ["pending", "accepted"]


def test_the_local_aws_endpoint_can_only_be_unset_or_loopback():
    import re

    env = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert env["AWS_ENDPOINT_URL"] == {"Fn::If": ["UseLocalAws", {"Ref": "LocalAwsEndpoint"}, {"Ref": "AWS::NoValue"}]}
    parameter = TEMPLATE["Parameters"]["LocalAwsEndpoint"]
    assert parameter["Default"] == ""
    pattern = re.compile(parameter["AllowedPattern"])
    for allowed in ["", "http://127.0.0.1:8000"]:
        assert pattern.fullmatch(allowed), allowed
    for refused in ["https://dynamodb.us-east-1.amazonaws.com", "http://127.0.0.1.evil.com:1", "http://10.0.0.1:8000", "http://localhost:8000"]:
        assert not pattern.fullmatch(refused), refused


def routes_of(function):
    """The `Routes` a function's binary serves, read from its main.rs (None: not an HTTP function)."""
    binary = FUNCTIONS[function]["Metadata"]["BuildProperties"]["Binary"]
    with open(os.path.join(ROOT, "functions", binary, "src", "main.rs")) as f:
        text = f.read()
    marker = "serve_http(leasekit_core::http::Routes::"
    if marker not in text:
        return None
    return text.split(marker, 1)[1].split(")", 1)[0]


# The routes that sign answers: `Routes::signs` (its unit test pins the same list).
SIGNING_ROUTES = {"Lease", "Mcp", "Public"}


def test_only_the_functions_that_sign_may_read_the_signing_key():
    http = {name for name in FUNCTIONS if routes_of(name)}
    assert len(http) == 5, http
    for name, f in FUNCTIONS.items():
        props = f["Properties"]
        reads_secret = any(
            "secretsmanager:GetSecretValue" in s["Action"] for s in props.get("Policies", [{}])[0].get("Statement", [])
        )
        has_secret = "SIGNING_KEY_SECRET" in props.get("Environment", {}).get("Variables", {})
        signs = routes_of(name) in SIGNING_ROUTES
        assert reads_secret == signs, (name, "GetSecretValue")
        assert has_secret == signs, (name, "SIGNING_KEY_SECRET")
    globals_env = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert "SIGNING_KEY_SECRET" not in globals_env, "every function would be told where the key is"


def test_each_function_may_do_only_what_its_routes_do():
    table = {
        "LeasesTable": "leases",
        "RequestsTable": "requests",
        "KeysTable": "keys",
        "PaymentsTable": "payments",
        "ClaimsTable": "claims",
    }

    def grants(name):
        out = set()
        for statement in FUNCTIONS[name]["Properties"]["Policies"][0]["Statement"]:
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            for resource in resources:
                if "Fn::GetAtt" in resource:
                    where = table[resource["Fn::GetAtt"][0]]
                elif "Ref" in resource:
                    where = resource["Ref"]
                else:
                    # "${PaymentsTable.Arn}/index/pending" -> payments/index/pending
                    sub = resource["Fn::Sub"]
                    where = table[sub[2:sub.index(".Arn")]] + sub[sub.index("}") + 1:]
                for action in statement["Action"]:
                    out.add((action, where))
        return out

    lease_writes = {("dynamodb:GetItem", "leases"), ("dynamodb:UpdateItem", "leases"),
                    ("dynamodb:GetItem", "requests"), ("dynamodb:PutItem", "requests"),
                    # list and audit: only their indexes, never a scan of a table.
                    ("dynamodb:Query", "leases/index/by-tenant"),
                    ("dynamodb:Query", "requests/index/audit-by-tenant"),
                    ("dynamodb:BatchGetItem", "leases")}
    secret = {("secretsmanager:GetSecretValue", "SigningKeySecret")}
    keys = {("dynamodb:GetItem", "keys")}
    # The ledger consumes (a put; two in a transaction with a payment identifier) and closes
    # payments, keeps a claim's answer for its identifier, and reads what a resent identified
    # payment first bought.
    paid_calls = {("dynamodb:PutItem", "payments"), ("dynamodb:UpdateItem", "payments"), ("dynamodb:GetItem", "payments")}
    expected = {
        "AuthorizerFunction": keys,
        # Key or payment: keys checked in the function; the ledger consumes and closes payments.
        "LeaseFunction": lease_writes | secret | keys | paid_calls,
        "PublicFunction": secret,
        "ClaimFunction": {("dynamodb:UpdateItem", "claims")} | paid_calls,
        # Key or wallet: sign-in-with-x nonces are consumed in the ledger (a put, never an update).
        "ClaimFreeFunction": keys | {("dynamodb:UpdateItem", "claims"), ("dynamodb:PutItem", "payments")},
        # Key or payment, as the lease route: paid tool calls (the x402 MCP binding).
        "McpFunction": lease_writes | secret | keys | paid_calls | {("dynamodb:UpdateItem", "claims")},
        "SettleSweeperFunction": {("dynamodb:Query", "payments/index/pending"), ("dynamodb:UpdateItem", "payments"),
                                  ("dynamodb:GetItem", "requests"), ("dynamodb:GetItem", "claims")},
    }
    assert {name: grants(name) for name in FUNCTIONS} == expected
