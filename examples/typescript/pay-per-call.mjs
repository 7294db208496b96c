// Pay per call from a wallet over x402, with no API key: the wallet is the tenant. Needs the
// official x402 packages and viem beside leasekit:
//
//     npm install ./clients/typescript @x402/core @x402/evm @x402/extensions viem
//     cargo run --release --bin leasekit -- serve &      # its local facilitator settles no chain
//     node examples/typescript/pay-per-call.mjs
import { LeaseClient } from "leasekit";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";

const wallet = privateKeyToAccount(process.env.WALLET_PRIVATE_KEY ?? generatePrivateKey());
const client = new LeaseClient({ url: process.env.LEASEKIT_URL ?? "http://127.0.0.1:3000", wallet });
// Each call is paid (the 402's offer, signed with the wallet); a retry after a lost answer
// resends the same payment and is charged once.
const lease = await client.acquire("invoice:INV-1009", { holder: "worker-1", ttl: 60 });
console.log(`granted: ${lease.granted}, fencing token ${lease.token}, paid by ${wallet.address}`);
await client.release("invoice:INV-1009", { holder: "worker-1", token: lease.token });
console.log("released:", (await client.get("invoice:INV-1009")).holder === null);
