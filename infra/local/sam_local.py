"""Run `sam local ...` with every function container on the host network, so that the whole
deployed shape (API Gateway emulation, the authorizer, the functions) talks only over 127.0.0.1.

SAM CLI 1.170 accepts `--docker-network host` but never sets the container's network mode (its
container.py only skips connecting to a named network), so every call to a function times out.
This launcher, before handing over to SAM's own command line:
- creates each container with `network_mode=host` (and without port bindings, which Docker
  refuses there);
- gives each container's Runtime Interface Emulator its own loopback ports (SAM picks the invoke
  port; the runtime API port is picked here), since on the host network they would all want 8080
  and 9001;
- matches SAM's REPORT log line anywhere in a chunk of output: SAM's `re.match` misses it when a
  function logged in the same chunk, and then waits 1 s more on every call.

Usage: python infra/local/sam_local.py start-api --template ... (any `sam local` arguments).
"""

import os
import re
import socket
import sys

from docker.models.containers import ContainerCollection
from samcli.cli.main import cli
from samcli.local.docker import container as sam_container

RIE = "/var/rapid/aws-lambda-rie"
REPORT = re.compile(r"REPORT RequestId:\s.+ Duration:\s.+\sMemory Size:\s.+\sMax Memory Used:\s.+", re.M)


def free_loopback_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_create = sam_container.Container.create


def create_on_host_network(self, context):
    entrypoint = list(self._entrypoint or [])
    if entrypoint and entrypoint[0] == RIE:
        entrypoint += [
            "--runtime-interface-emulator-address",
            f"127.0.0.1:{self.rapid_port_host}",
            "--runtime-api-address",
            f"127.0.0.1:{free_loopback_port()}",
        ]
        self._entrypoint = entrypoint
    self._container_opts = {**(self._container_opts or {}), "network_mode": "host"}
    self._container_host = "127.0.0.1"
    self._container_host_interface = "127.0.0.1"
    created = _create(self, context)
    # Whoever started us removes exactly these containers when done (SAM may leave warm ones).
    record = os.environ.get("LEASEKIT_SAM_CONTAINERS")
    if record:
        with open(record, "a") as f:
            f.write(f"{self.id}\n")
    return created


_write = sam_container.Container._handle_data_writing


def handle_data_writing(output_stream, output_data, event):
    # SAM's own check (re.match) only sees a REPORT line at the start of the chunk.
    _write(output_stream, output_data, None)
    if event is not None and REPORT.search(output_data.decode("utf-8", "replace")):
        event.set()


_docker_create = ContainerCollection.create


def docker_create(self, image, command=None, **kwargs):
    # Docker refuses port bindings on the host network; the emulator's port is on loopback anyway.
    if kwargs.get("network_mode") == "host":
        kwargs.pop("ports", None)
    return _docker_create(self, image, command, **kwargs)


ContainerCollection.create = docker_create
sam_container.Container.create = create_on_host_network
sam_container.Container._handle_data_writing = staticmethod(handle_data_writing)

if __name__ == "__main__":
    sys.exit(cli(["local", *sys.argv[1:]]))
