// A work queue of agents, with the TypeScript client (npm install ./clients/typescript, built
// with `npm run build` there).
//
//     cargo run --release --bin leasekit -- serve --api-key dev:dev-key-0123456789 &
//     node examples/typescript/work-queue.mjs
//
// Three workers take the next free task of one list until none is left: `claimNext` holds the
// first task nobody holds, nobody finished and nobody waits for; `lease.finish(result)` releases
// it as finished, so no one is ever handed it again (an acquire is told who did it and what came
// of it: `Finished`). A worker that dies mid-task leaves it held only until its lease lapses;
// then the next worker takes it, with a larger fencing token that fences the dead one's writes.
import { Finished, LeaseClient, NotAcquired } from "leasekit";

const client = new LeaseClient({
  url: process.env.LEASEKIT_URL ?? "http://127.0.0.1:3000",
  apiKey: process.env.LEASEKIT_API_KEY ?? "dev-key-0123456789",
  tenant: "examples",
});
const tasks = [0, 1, 2, 3, 4, 5].map((n) => `issue-${process.pid}-${n}`);
const done = new Map();

async function worker(name) {
  for (;;) {
    try {
      await client.claimNext(tasks, { holder: name, ttl: 30 }, async (task) => {
        const result = `fixed by ${name} under token ${task.token}`;
        await task.finish(result);
        done.set(task.resources[0], result);
      });
    } catch (error) {
      if (error instanceof Finished) return; // every task is finished
      if (!(error instanceof NotAcquired)) throw error; // the others are being worked on: ask again
    }
  }
}

await Promise.all(["agent-0", "agent-1", "agent-2"].map(worker));
console.log(`${done.size} tasks, each done once: ${[...done.keys()].sort().join() === [...tasks].sort().join()}`);
try {
  await client.withLease(tasks[0], { holder: "late-agent" }, () => undefined);
} catch (error) {
  if (!(error instanceof Finished)) throw error;
  console.log(`${tasks[0]} is finished: ${error.done.result}`);
}
