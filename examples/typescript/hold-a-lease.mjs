// Hold a lease while a job runs, with the TypeScript client (npm install ./clients/typescript,
// built with `npm run build` there).
//
//     cargo run --release --bin leasekit -- serve --api-key dev:dev-key-0123456789 &
//     node examples/typescript/hold-a-lease.mjs
import { setTimeout as sleep } from "node:timers/promises";
import { LeaseClient, NotAcquired } from "leasekit";

const client = new LeaseClient({
  url: process.env.LEASEKIT_URL ?? "http://127.0.0.1:3000",
  apiKey: process.env.LEASEKIT_API_KEY ?? "dev-key-0123456789",
  tenant: "examples",
});
try {
  await client.withLease("report:nightly", { holder: `example-${process.pid}`, ttl: 5, wait: 2 }, async (lease) => {
    for (let step = 0; step < 3; step++) {
      lease.check(); // stop before the lease could be someone else's
      console.log(`step ${step} under fencing token ${lease.token}`);
      // Longer than a third of the TTL: the lease renews meanwhile. The sleep ends early, with
      // the loss as its error, if the lease is lost (pass lease.signal to fetch the same way).
      await sleep(2000, undefined, { signal: lease.signal });
    }
  });
} catch (error) {
  if (!(error instanceof NotAcquired)) throw error;
  console.log(`someone else has it: ${error.holder}`);
}
console.log("released:", (await client.get("report:nightly")).holder === null);
