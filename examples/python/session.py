"""An agent's many holds on one heartbeat: a session, with the Python client
(pip install ./clients/python).

    cargo run --release --bin leasekit -- serve --api-key dev:dev-key-0123456789 &
    python3 examples/python/session.py

The session is kept alive in the background (one keepalive a third of the way to its local
deadline, whatever it holds); every hold in it lives exactly as long as the session, so one
`lost` says when to stop all the work; leaving the block closes the session and frees every
hold at once. Were the process killed instead, all of them would be free when the session's
TTL runs out.
"""

import os

from leasekit import Client, NotAcquired

client = Client(os.environ.get("LEASEKIT_URL", "http://127.0.0.1:3000"),
                api_key=os.environ.get("LEASEKIT_API_KEY", "dev-key-0123456789"), tenant="examples")
run = os.getpid()
tasks = [f"task-{run}-{n}" for n in range(3)]

with client.session(holder="agent-1", ttl=10) as session:
    tokens = {task: session.acquire(task) for task in tasks}
    print(f"session {session.id} holds {len(tokens)} tasks, tokens {sorted(tokens.values())}")
    for task, token in tokens.items():
        session.check()  # raises LeaseLost the moment the session (and so every hold) is lost
        print(f"working on {task} under fencing token {token}")
    try:
        with client.session(holder="agent-2", ttl=10) as other:
            other.acquire(tasks[0])
    except NotAcquired as taken:
        print(f"another agent's session finds {tasks[0]} held by {taken.holder}")
print("closed: every task free again:", all(client.get(task).holder is None for task in tasks))
