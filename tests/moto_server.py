"""Serve moto's DynamoDB on 127.0.0.1:PORT, single-threaded.

Stock `moto_server` handles requests on several threads and is then not atomic under concurrent
conditional writes (two winners of one conditional UpdateItem were seen). One thread makes every
request atomic, which is what DynamoDB promises, so the store tests can run against it.
Usage: python3 tests/moto_server.py PORT
"""

import sys

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


def main() -> None:
    port = int(sys.argv[1])
    app = DomainDispatcherApplication(create_backend_app)
    run_simple("127.0.0.1", port, app, threaded=False, use_reloader=False)


if __name__ == "__main__":
    main()
