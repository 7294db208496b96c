// leasekit: a client for the leasekit lease service.

export { LeaseClient, type CallOptions, type ClientOptions, type MutationOptions } from "./client.js";
export { HeldLease, type FinishOptions, type HoldOptions } from "./held.js";
export { HeldSession, type SessionOptions } from "./session.js";
export {
  FENCE,
  S3_FENCE,
  dynamodbPut,
  postgresUpsert,
  s3Put,
  type AwsClient,
  type FencePermit,
  type PermitChecker,
  type SqlClient,
} from "./fencing.js";
export { Clock, safetyMarginMs } from "./clock.js";
export type { AuditEntry, Done, Lease, Leader, Member, Page, Permit, SessionState, Waiter } from "./model.js";
export type { Wallet } from "./x402.js";
export {
  FenceRefused,
  Finished,
  Forbidden,
  IdempotencyConflict,
  InvalidInput,
  LeaseLost,
  LeasekitError,
  NotAcquired,
  PayloadTooLarge,
  PaymentIdentifierConflict,
  PaymentInProgress,
  PaymentRequired,
  RateLimited,
  ServiceError,
  StoreUnavailable,
  Unauthorized,
  Unavailable,
} from "./errors.js";
