"""A work queue of agents, with the Python client (pip install ./clients/python).

    cargo run --release --bin leasekit -- serve --api-key dev:dev-key-0123456789 &
    python3 examples/python/work_queue.py

Three workers take the next free task of one list until none is left: `claim_next` holds the
first task nobody holds, nobody finished and nobody waits for; `finish(result)` releases it as
finished, so no one is ever handed it again (an acquire is told who did it and what came of it:
`Finished`). A worker that dies mid-task leaves it held only until its lease lapses; then the
next worker takes it, with a larger fencing token that fences the dead one's late writes.
"""

import os
import threading

from leasekit import Client, Finished, NotAcquired

client = Client(os.environ.get("LEASEKIT_URL", "http://127.0.0.1:3000"),
                api_key=os.environ.get("LEASEKIT_API_KEY", "dev-key-0123456789"), tenant="examples")
run = os.getpid()
tasks = [f"issue-{run}-{n}" for n in range(6)]
done: dict[str, str] = {}


def worker(name: str) -> None:
    while True:
        try:
            with client.claim_next(tasks, holder=name, ttl=30) as task:
                result = f"fixed by {name} under token {task.token}"
                task.finish(result)
                done[task.resource] = result
        except Finished:
            return  # every task is finished
        except NotAcquired:
            continue  # the others are being worked on: ask again


workers = [threading.Thread(target=worker, args=(f"agent-{n}",)) for n in range(3)]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(f"{len(done)} tasks, each done once: {sorted(done) == sorted(tasks)}")
try:
    with client.lease(tasks[0], holder="late-agent"):
        pass
except Finished as finished:
    assert finished.done is not None
    print(f"{tasks[0]} is finished: {finished.done.result}")
