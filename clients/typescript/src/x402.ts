// Paying per call over x402 with the official SDK (`@x402/core`, `@x402/evm`,
// `@x402/extensions`: optional peer dependencies, loaded only by a client that pays).
//
// A call's payment is made once, when the service first answers 402, and sent again unchanged
// on that call's own retries. It carries a payment identifier (the x402 `payment-identifier`
// extension) wherever the service declares it, so a retry after a lost answer gets the answer
// it paid for and is charged once. Only when the service says the payment bought nothing (the
// first attempt failed, so nothing was charged) is a new one made, with a new identifier.

import { ServiceError } from "./errors.js";

/** The payment's header; the 402 offer's header. */
export const PAYMENT_SIGNATURE = "payment-signature";
export const PAYMENT_REQUIRED = "payment-required";

/**
 * The wallet a client pays from: a viem account that signs typed data, such as
 * `privateKeyToAccount(key)` from `viem/accounts`.
 */
export interface Wallet {
  readonly address: `0x${string}`;
  signTypedData(parameters: never): Promise<`0x${string}`>;
}

/** Makes the `PAYMENT-SIGNATURE` value that answers a 402 offer header. */
export type Payer = (offerHeader: string | null) => Promise<string>;

const missing = (error: unknown): Error =>
  new Error(
    `paying with a wallet needs the official x402 packages: npm install @x402/core @x402/evm @x402/extensions (${String(error)})`,
  );

/** A payer for `wallet`, with the SDK loaded on first use. */
export function payerFor(wallet: Wallet): Payer {
  let ready: Promise<Payer> | undefined;
  return async (offer) => {
    ready ??= load(wallet);
    return (await ready)(offer);
  };
}

async function load(wallet: Wallet): Promise<Payer> {
  let sdk;
  try {
    sdk = await Promise.all([
      import("@x402/core/client"),
      import("@x402/evm/exact/client"),
      import("@x402/extensions/payment-identifier"),
    ]);
  } catch (error) {
    throw missing(error);
  }
  const [{ x402Client, x402HTTPClient }, { registerExactEvmScheme }, identifier] = sdk;
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: wallet as never });
  const http = new x402HTTPClient(client);
  return async (offerHeader) => {
    // An offer that cannot be read or paid is the service's answer the client cannot use.
    if (!offerHeader) throw new ServiceError("a 402 without the PAYMENT-REQUIRED header", { status: 402 });
    let required;
    try {
      required = http.getPaymentRequiredResponse((name) => (name.toLowerCase() === PAYMENT_REQUIRED ? offerHeader : null));
    } catch (error) {
      throw new ServiceError(`a 402 offer that cannot be read: ${String(error)}`, { status: 402 });
    }
    let payload;
    try {
      payload = await http.createPaymentPayload(required);
    } catch (error) {
      throw new ServiceError(`the 402 offer cannot be paid: ${String(error)}`, { status: 402 });
    }
    // Named with a new payment identifier if the service declared the extension (the SDK's
    // helper adds it only then); a copy, as the helper writes into what it is given.
    const extensions = structuredClone(payload.extensions ?? required.extensions ?? {}) as Record<string, unknown>;
    identifier.appendPaymentIdentifierToExtensions(extensions, identifier.generatePaymentId());
    const named = { ...payload, ...(Object.keys(extensions).length > 0 ? { extensions } : {}) };
    const headers = http.encodePaymentSignatureHeader(named);
    const value = Object.entries(headers).find(([name]) => name.toLowerCase() === PAYMENT_SIGNATURE)?.[1];
    if (value === undefined) throw new ServiceError("the x402 SDK made no PAYMENT-SIGNATURE header", { status: 402 });
    return value;
  };
}
