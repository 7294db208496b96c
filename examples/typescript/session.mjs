// An agent's many holds on one heartbeat: a session, with the TypeScript client
// (npm install ./clients/typescript, built with `npm run build` there).
//
//     cargo run --release --bin leasekit -- serve --api-key dev:dev-key-0123456789 &
//     node examples/typescript/session.mjs
//
// The session is kept alive in the background (one keepalive a third of the way to its local
// deadline, whatever it holds); every hold in it lives exactly as long as the session, so one
// `session.signal` says when to stop all the work; returning closes the session and frees every
// hold at once. Were the process killed instead, all of them would be free when the session's
// TTL runs out.
import { LeaseClient, NotAcquired } from "leasekit";

const client = new LeaseClient({
  url: process.env.LEASEKIT_URL ?? "http://127.0.0.1:3000",
  apiKey: process.env.LEASEKIT_API_KEY ?? "dev-key-0123456789",
  tenant: "examples",
});
const tasks = [0, 1, 2].map((n) => `task-${process.pid}-${n}`);

await client.withSession({ holder: "agent-1", ttl: 10 }, async (session) => {
  const tokens = [];
  for (const task of tasks) tokens.push(await session.acquire(task));
  console.log(`session ${session.id} holds ${tokens.length} tasks, tokens ${tokens.join(", ")}`);
  for (const task of tasks) {
    session.check(); // throws LeaseLost the moment the session (and so every hold) is lost
    // Pass session.signal to fetch and child processes: it aborts them all at once.
    console.log(`working on ${task} under fencing token ${session.tokens[task]}`);
  }
  try {
    await client.withSession({ holder: "agent-2", ttl: 10 }, (other) => other.acquire(tasks[0]));
  } catch (error) {
    if (!(error instanceof NotAcquired)) throw error;
    console.log(`another agent's session finds ${tasks[0]} held by ${error.holder}`);
  }
});
const free = await Promise.all(tasks.map(async (task) => (await client.get(task)).holder === null));
console.log("closed: every task free again:", free.every(Boolean));
