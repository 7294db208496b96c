// Fencing at the store: writes that the store itself refuses when they carry a token smaller
// than the one it last took (docs/adr/0013-fencing-at-the-store.md).
//
// A fencing token protects only a store that refuses a smaller one. Each helper here makes one
// write, atomic in the store (no read-then-write outside it): the store keeps the token that
// last wrote beside the data (any other reader can see it) and refuses a write whose token is
// smaller, throwing `FenceRefused` with both tokens; nothing is written then. Equal tokens
// write: the holder's own retries and later writes carry the same token.
//
// The fence is only as good as the writers that keep it: every write of the data must go
// through these helpers. A write or delete that drops the fence (an S3 copy that replaces the
// metadata, a delete of the item, row or object) resets it, and any token lands after that. A
// set's hold has a token per resource: fence each write with `{ resource, token:
// held.tokens[resource] }`. And a refusal after the store's client retried on its own (the AWS
// SDK does, on a 500 or a lost answer) may follow an earlier attempt of the same write that
// landed and was then replaced by the larger token's: the store holds that write either way.
//
// The stores' clients are the caller's (the AWS SDK v3, node-postgres), optional peer
// dependencies of this package: nothing here imports them at load, and the types below only
// describe what the helpers call, so that the package type-checks without them.

import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { HeadObjectCommandOutput } from "@aws-sdk/client-s3";
import { FenceRefused } from "./errors.js";
import { HeldLease } from "./held.js";

/** Where a helper keeps the token that last wrote, unless told otherwise. */
export const FENCE = "fence";
/** The S3 object metadata key that carries it (S3 lower-cases metadata keys). */
export const S3_FENCE = "leasekit-fence";

/** What asks the service whether a permit is current: a `LeaseClient`. */
export interface PermitChecker {
  check(resource: string, token: number, options?: { holder?: string }): Promise<{ readonly current: boolean | null }>;
}

/**
 * What a fenced write needs of a hold that is not a `HeldLease` (an `acquire`'s answer, a
 * session's hold): its resource and token, and for a semaphore's permit (`limit` > 1) the
 * holder and the client that granted it, to ask whether it is still current.
 */
export interface FencePermit {
  readonly resource: string;
  readonly token: number;
  readonly holder?: string;
  /** The resource's limit (default 1, a lease). */
  readonly limit?: number;
  readonly client?: PermitChecker;
}

/** What sends an AWS SDK v3 command: a `DynamoDBClient` or an `S3Client`. */
export interface AwsClient {
  send(command: unknown): Promise<unknown>;
}

/** What runs a statement with $1..$n parameters: node-postgres's `Client`, `PoolClient` or `Pool`. */
export interface SqlClient {
  query(text: string, values: unknown[]): Promise<{ readonly rows: readonly Record<string, unknown>[] }>;
}

/**
 * The token a write carries, and whether the store's fence decides it. A lease's token is its
 * own fence (`guarded`). A semaphore's permits are not ordered by who holds now (two live
 * permits have two tokens, neither stale), so the highest token is no fence there: the service
 * is asked first (`check`, signed) and the write goes ahead only while the permit is current,
 * not compared with the store's fence (which another live permit's larger token may hold).
 * That narrows the window to the time between the check and the write; it does not close it.
 */
async function permitOf(held: HeldLease | FencePermit): Promise<{ token: number; guarded: boolean }> {
  const { token } = held;
  if (!Number.isSafeInteger(token) || token < 1) throw new TypeError(`a fencing token is a positive integer, not ${token}`);
  if (held instanceof HeldLease && held.resources.length !== 1) {
    // Each resource of a set has its own counter: the first one's token is no fence for another's data.
    throw new TypeError(
      `a set's hold has a token per resource (${held.resources.join(", ")}): fence a write with ` +
        "{ resource, token: held.tokens[resource] } of the resource it belongs to",
    );
  }
  const resource = held instanceof HeldLease ? (held.resources[0] ?? "") : held.resource;
  const limit = held.limit ?? 1;
  if (limit <= 1) return { token, guarded: true };
  let current: boolean;
  if (held instanceof HeldLease) {
    current = await held.isCurrent();
  } else if (held.client === undefined) {
    throw new TypeError("a semaphore's permit needs the client that granted it, to check it");
  } else {
    const answer = await held.client.check(resource, token, held.holder === undefined ? {} : { holder: held.holder });
    current = answer.current === true;
  }
  if (!current) {
    throw new FenceRefused(`permit ${token} of ${resource} is no longer current: nothing written`, { token, found: null });
  }
  return { token, guarded: false };
}

function refused(where: string, token: number, found: number | null): FenceRefused {
  const holds = found === null ? "a larger fence" : `fence ${found}, larger`;
  return new FenceRefused(`${where} holds ${holds} than this write's token ${token}: nothing written`, { token, found });
}

/** A fence as these helpers write it: a base-10 integer, no sign, no leading zero. */
const TOKEN = /^(0|[1-9][0-9]*)$/;

/**
 * A stored fence (text, or a number) as a number; null when there is none, or when it is a
 * token above the largest safe integer (larger than any token a number here can carry: the
 * write is refused all the same). One that is not a plain base-10 integer was not written by
 * these helpers: the write is refused, naming it.
 */
function fenceIn(where: string, token: number, value: unknown): number | null {
  if (value === undefined || value === null) return null;
  const text = String(value);
  if (!TOKEN.test(text)) {
    throw new FenceRefused(`${where} carries a fence that is not a token (${JSON.stringify(text)}): nothing written`, {
      token,
      found: null,
    });
  }
  const fence = Number(text);
  return Number.isSafeInteger(fence) ? fence : null;
}

/** Whether a stored fence refuses `token`: larger, or too large for a number to hold. */
function larger(stored: unknown, fence: number | null, token: number): boolean {
  return stored !== undefined && stored !== null && (fence === null || fence > token);
}

/** Whether `error` is an AWS SDK error of one of `names` (by name: the caller's SDK may be another copy than ours). */
function isNamed(error: unknown, ...names: string[]): boolean {
  return typeof error === "object" && error !== null && names.includes(String((error as { name?: unknown }).name));
}

/**
 * Put `item` (DynamoDB's attribute-value form: `{ id: { S: "INV-1009" } }`) into `table` with
 * attribute `fence` set to the token, unless the stored item's fence is larger: one conditional
 * PutItem (`attribute_not_exists(fence) OR fence <= token`), whose refusal hands back the larger
 * fence (`ReturnValuesOnConditionCheckFailure`) at no extra request. `client` is a
 * `DynamoDBClient` (@aws-sdk/client-dynamodb). A semaphore's permit (limit > 1) is checked with
 * the service first and written only while current, not fenced: that narrows the window to the
 * time between the check and the write, and does not close it; a lease (limit 1) is the fence.
 */
export async function dynamodbPut(
  client: AwsClient,
  table: string,
  item: Readonly<Record<string, unknown>>,
  held: HeldLease | FencePermit,
  options: { fence?: string } = {},
): Promise<void> {
  const fence = options.fence ?? FENCE;
  const { PutItemCommand } = await import("@aws-sdk/client-dynamodb");
  const { token, guarded } = await permitOf(held);
  const condition = guarded
    ? {
        ConditionExpression: "attribute_not_exists(#f) OR #f <= :t",
        ExpressionAttributeNames: { "#f": fence },
        ExpressionAttributeValues: { ":t": { N: String(token) } },
        ReturnValuesOnConditionCheckFailure: "ALL_OLD" as const,
      }
    : {};
  const where = `the item in ${table}`;
  try {
    await client.send(
      new PutItemCommand({
        TableName: table,
        Item: { ...(item as Record<string, AttributeValue>), [fence]: { N: String(token) } },
        ...condition,
      }),
    );
  } catch (error) {
    if (!isNamed(error, "ConditionalCheckFailedException")) throw error;
    // The store compared the numbers: its fence is larger, whatever form it is kept in (1E+2).
    const old = Number((error as { Item?: Record<string, { N?: string }> }).Item?.[fence]?.N ?? Number.NaN);
    throw refused(where, token, Number.isSafeInteger(old) ? old : null);
  }
}

/**
 * Write object `key` of `bucket` with `body` and the token in its metadata (`leasekit-fence`),
 * unless the current object carries a larger one. S3 cannot compare numbers: the helper reads
 * the object's ETag and fence (HEAD), then writes on condition that the object is still that one
 * (`IfMatch` the ETag; `IfNoneMatch: "*"` when there was none), so a write in between fails the
 * condition and the helper reads again, `attempts` times at most (then `FenceRefused` with no
 * token found). Two requests a write, more under contention. The ETag of an object put whole is
 * the MD5 of its bytes, not of its metadata: a write in between that leaves the very bytes read
 * does not fail the condition, and a stale write can then land over it. A body that carries the
 * token (so that no two tokens write the same bytes) never meets that. `client` is an `S3Client`
 * (@aws-sdk/client-s3); `body` is bytes or a string, as it may be sent more than once. A
 * semaphore's permit (limit > 1) is checked with the service first and written only while
 * current, not fenced: that narrows the window to the time between the check and the write, and
 * does not close it; a lease (limit 1) is the fence.
 */
export async function s3Put(
  client: AwsClient,
  bucket: string,
  key: string,
  body: string | Uint8Array,
  held: HeldLease | FencePermit,
  options: { attempts?: number } = {},
): Promise<void> {
  const { HeadObjectCommand, PutObjectCommand } = await import("@aws-sdk/client-s3");
  const { token, guarded } = await permitOf(held);
  const where = `s3://${bucket}/${key}`;
  for (let attempt = 0; attempt < (options.attempts ?? 5); attempt++) {
    let etag: string | undefined;
    let stored: string | undefined;
    try {
      const head = (await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))) as HeadObjectCommandOutput;
      etag = head.ETag;
      stored = head.Metadata?.[S3_FENCE];
    } catch (error) {
      if (!isNamed(error, "NotFound", "NoSuchKey")) throw error;
    }
    if (guarded) {
      const found = fenceIn(where, token, stored);
      if (larger(stored, found, token)) throw refused(where, token, found);
    }
    try {
      await client.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: key,
          Body: body,
          Metadata: { [S3_FENCE]: String(token) },
          ...(etag === undefined ? { IfNoneMatch: "*" } : { IfMatch: etag }),
        }),
      );
      return;
    } catch (error) {
      // The object is no longer the one read (written, or being written, meanwhile): read again.
      if (!isNamed(error, "PreconditionFailed", "ConditionalRequestConflict")) throw error;
    }
  }
  throw new FenceRefused(`${where} kept changing: nothing written`, { token, found: null });
}

/** `name` as a quoted PostgreSQL identifier (inner quotes doubled; NUL cannot be sent at all). */
function ident(name: string): string {
  if (name.includes("\0")) throw new TypeError(`an identifier cannot hold NUL: ${JSON.stringify(name)}`);
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * Insert or update the row of `key` (column -> value) in `table` with `values` and column
 * `fence` set to the token, unless the stored row's fence is larger: one `INSERT ... ON CONFLICT
 * (key) DO UPDATE SET ... WHERE fence <= token RETURNING fence`; no row back means refused, and
 * one SELECT then reads the larger fence for the error. `client` is node-postgres's `Client` or
 * `Pool` (committed by the caller when in a transaction); the key columns need a unique
 * constraint. Table and column names are quoted identifiers, each one name (a `schema.table` is
 * not split); values are parameters. A semaphore's permit (limit > 1) is checked with the
 * service first and written only while current, not fenced: that narrows the window to the time
 * between the check and the write, and does not close it; a lease (limit 1) is the fence.
 */
export async function postgresUpsert(
  client: SqlClient,
  table: string,
  key: Readonly<Record<string, unknown>>,
  values: Readonly<Record<string, unknown>>,
  held: HeldLease | FencePermit,
  options: { fence?: string } = {},
): Promise<void> {
  const fence = options.fence ?? FENCE;
  const keys = Object.keys(key);
  if (keys.length === 0) throw new TypeError("the key needs at least one column");
  const { token, guarded } = await permitOf(held);
  const [t, f] = [ident(table), ident(fence)];
  const columns = [...keys, ...Object.keys(values), fence];
  const params = [...Object.values(key), ...Object.values(values), token];
  const updates = [...Object.keys(values), fence].map((c) => `${ident(c)} = EXCLUDED.${ident(c)}`);
  const written = await client.query(
    `INSERT INTO ${t} (${columns.map(ident).join(", ")}) VALUES (${params.map((_, i) => `$${i + 1}`).join(", ")}) ` +
      `ON CONFLICT (${keys.map(ident).join(", ")}) DO UPDATE SET ${updates.join(", ")} ` +
      // A row whose fence is NULL (a column just added) is written, as one without a fence.
      (guarded ? `WHERE ${t}.${f} IS NULL OR ${t}.${f} <= EXCLUDED.${f} ` : "") +
      `RETURNING ${f}`,
    params,
  );
  if (written.rows.length > 0) return;
  const where = `the row of ${table}`;
  const { rows } = await client.query(
    `SELECT ${f} FROM ${t} WHERE ${keys.map((c, i) => `${ident(c)} = $${i + 1}`).join(" AND ")}`,
    Object.values(key),
  );
  throw refused(where, token, fenceIn(where, token, rows[0]?.[fence]));
}
