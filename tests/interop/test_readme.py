"""The README's first five minutes, run as a new user pastes them: its first command starts the
server (the debug build, on a free port, in a fresh directory, so its store is `./.leasekit`
there), then the marked block runs in bash in that directory. Two lines of the block are replaced,
each checked to be there word for word first: the base URL (the server's port is free, not 3000)
and the `leasekit` function (the debug build instead of a release build made on the spot).
Everything else runs as written: `keys create` for the admin key, every curl, every `jq .data`."""

import json
import os
import re
import subprocess
import tempfile

from conftest import BIN, needs_own_server

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
MARK = "<!-- first-five-minutes:"
URL_LINE = "URL=http://127.0.0.1:3000"
CLI_LINE = 'leasekit() { cargo run -q --release --bin leasekit -- "$@"; }'
SERVE = "cargo run --release --bin leasekit -- serve --api-key dev:dev-key-0123456789"


def readme():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def first_five_minutes(text):
    """The sh block after the mark."""
    after = text[text.index(MARK):]
    match = re.search(r"```sh\n(.*?)```", after, re.S)
    assert match, "no sh block after the first-five-minutes mark"
    return match.group(1)


def answers(output):
    """The JSON values jq printed, in order."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while at < len(output):
        if output[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(output, at)
        found.append(value)
    return found


def test_the_first_five_minutes_work_pasted_as_they_stand():
    needs_own_server("the README's own server, in a directory of its own")
    text = readme()
    # The README's first command is the server these minutes call.
    assert SERVE in text.split("---")[0], "the README's first lines no longer start the server the block uses"
    block = first_five_minutes(text)
    for line in (URL_LINE, CLI_LINE):
        assert line in block.splitlines(), f"{line!r} changed: change this test with it"
    workdir = tempfile.mkdtemp(prefix="readme-")
    server = subprocess.Popen(
        [BIN, "serve", "--addr", "127.0.0.1:0", "--api-key", "dev:dev-key-0123456789"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        env={**os.environ, "RUST_LOG": "error"},
        text=True,
    )
    try:
        url = server.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        script = block.replace(URL_LINE, f"URL={url}").replace(CLI_LINE, f'leasekit() {{ "{os.path.abspath(BIN)}" "$@"; }}')
        run = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script], cwd=workdir, capture_output=True, text=True, timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("LEASEKIT_")},
        )
        assert run.returncode == 0, run.stderr
        # keys create found the server's store, so it did not warn of a new one.
        assert "warning" not in run.stderr, run.stderr
        took, refused, got, revoked, retaken = answers(run.stdout)
        assert took["granted"] is True and took["fencingToken"] == 1, took
        assert refused["status"] == "fail" and refused["holder"] == "worker-7", refused
        assert [w["ruleId"] for w in refused["witnesses"]] == ["LEASE_HELD"], refused
        assert got["holder"] == "worker-7", got
        assert revoked["status"] == "pass", revoked
        assert retaken["granted"] is True and retaken["fencingToken"] == 2 and retaken["holder"] == "worker-8", retaken
    finally:
        server.terminate()
        assert server.wait(timeout=10) == 0
