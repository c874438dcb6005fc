/**
 * Where devices and telemetry live: the store interfaces core and processing work against, and
 * their PostgreSQL implementation.
 *
 * The tables are defined in schema.sql alone, which the database image applies (image/database.sh);
 * no component runs DDL, and each connects as its own role (config.ts DATABASE_ROLES), allowed
 * only what it does below.
 *
 * Guarantees: `createPool` connects as the given role to database `iot`. `reachesTables` resolves
 * once the role can read every one of the given tables (they exist and it may), and rejects
 * naming the first it cannot. A telemetry row's key is (device id, message id): `insertTelemetry`
 * stores a batch in one statement (one transaction), a key already stored (or twice in the batch)
 * changing nothing, and returns how many rows it added, so a redelivered message is stored exactly once,
 * and one device's message ids cannot shadow another's. `isDataError` tells an error of the data
 * itself (SQLSTATE classes 22 and 54: the same statement fails every time) from one of the
 * connection or the server's state (worth retrying). `deadLetter` keeps a message the database
 * refused as data, its raw bytes and the error, once per (device id, message id).
 * `deleteExpired` deletes at most `limit` telemetry rows received (and dead letters set aside)
 * more than `seconds` ago, in one short statement through an index on the time, and returns how
 * many it deleted, so retention never holds long locks. `createDevice` of an existing id
 * returns false and leaves the device unchanged; `setPasswordHash` replaces a device's hash and
 * `deleteDevice` removes the device from the registry, each false for an unknown id; so do
 * `createApplication` and `deleteApplication` for applications' token hashes. `recordConnection`
 * keeps a device's connection state from the gateways' connection events (a refused login
 * changes nothing) and `deviceState` reads it, with the newest telemetry, for a registered device. Deleting a
 * device leaves its telemetry and dead letters where they are (retention deletes them in time).
 * A connection whose statement failed for anything but its data (store.ts `query`: a server
 * gone, a former primary turned read-only standby, a statement past STATEMENT_TIMEOUT_MS) is
 * closed, never reused, so after a database failover the next statement reaches the new primary.
 * `telemetry` lists newest first (receivedAt, then message id, descending), after the cursor
 * `before` when given (strictly older in that order: paging on from the last record of a page
 * misses and repeats nothing), each record with the time it was stored; it returns undefined for
 * a device id neither registered nor with any telemetry stored (so a deleted device's telemetry
 * stays readable until retention deletes it). Only password hashes are stored. Every statement is
 * parameterised (the only names written into one are the constant table names of `Table`).
 */

import pg from 'pg';
import { DATABASE_NAME, type Endpoint } from './config.ts';
import type { Logger } from './log.ts';
import type { ConnectionEvent } from './events.ts';
import type { Payload, TelemetryEnvelope } from './telemetry.ts';

export interface TelemetryRecord {
  messageId: string;
  receivedAt: string;
  /** When processing committed it (ISO 8601, the database's clock). */
  storedAt: string;
  payload: Payload;
}

/** Where a page of telemetry starts: records strictly older than this one (receivedAt, then message id). */
export interface TelemetryCursor {
  receivedAt: string;
  /** Without it: every record received before `receivedAt`. */
  messageId?: string;
}

/** What core needs. */
export interface DeviceStore {
  createDevice(id: string, passwordHash: string): Promise<boolean>;
  passwordHash(id: string): Promise<string | undefined>;
  /** False for an unknown device. */
  setPasswordHash(id: string, passwordHash: string): Promise<boolean>;
  /** False for an unknown device; its telemetry stays. */
  deleteDevice(id: string): Promise<boolean>;
  telemetry(deviceId: string, limit: number, before?: TelemetryCursor): Promise<TelemetryRecord[] | undefined>;
  /** A registered device's connection state; undefined for an unknown device. */
  deviceState(id: string): Promise<DeviceState | undefined>;
}

/** What core's device resource shows. */
export interface DeviceState {
  id: string;
  /** A gateway holds a connection of the device open (as the gateways last told). */
  connected: boolean;
  /** The latest of its connection transitions and its stored telemetry's receivedAt; null if never heard of. */
  lastSeen: string | null;
}

/** What processing keeps of connection events (connection-state.ts). */
export interface ConnectionStateStore {
  /**
   * A `connected` makes its connection the device's open one unless a later transition is
   * recorded; a `disconnected` closes it only if it is that connection; either moves lastSeen
   * forward. Recording an event twice changes nothing more.
   */
  recordConnection(event: ConnectionEvent): Promise<void>;
}

/** The applications' credentials (core/applications.ts): only a hash of each token. */
export interface ApplicationStore {
  /** False when the id exists (nothing changed). */
  createApplication(id: string, tokenHash: string): Promise<boolean>;
  applicationTokenHash(id: string): Promise<string | undefined>;
  /** False for an unknown application. */
  deleteApplication(id: string): Promise<boolean>;
}

/** A message processing could not store: kept aside with the reason. */
export interface DeadLetter {
  /** Empty when the message was no envelope at all. */
  deviceId: string;
  /** The envelope's message id, or for a message that was no envelope the SHA-256 of its bytes. */
  messageId: string;
  bytes: Uint8Array;
  error: string;
}

/** What processing needs. */
export interface TelemetryStore {
  /** Stores every envelope whose (device id, message id) is not stored already, in one transaction; how many rows it added. */
  insertTelemetry(envelopes: readonly TelemetryEnvelope[]): Promise<number>;
  deadLetter(letter: DeadLetter): Promise<void>;
}

/** Whether the statement failed for its data (SQLSTATE class 22 data exception, 54 program limit exceeded): it would fail again. */
export function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(22|54)[0-9A-Z]{3}$/.test(code);
}

/** The tables of schema.sql. */
export const TABLES = ['devices', 'telemetry', 'dead_letters', 'applications', 'device_connections'] as const;
export type Table = (typeof TABLES)[number];

/** A pool of connections as `user` (one of DATABASE_ROLES) to database `iot`. */
export function createPool(endpoint: Endpoint, user: string, password: string, log: Logger): pg.Pool {
  const pool = new pg.Pool({
    host: endpoint.host,
    port: endpoint.port,
    user,
    database: DATABASE_NAME,
    password,
    max: 5,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    // A server gone without a word (its node lost) is noticed rather than waited on for minutes.
    keepAlive: true,
    query_timeout: STATEMENT_TIMEOUT_MS,
  });
  // An idle client's connection error would otherwise be an unhandled 'error' event.
  pool.on('error', (error) => log.warn('database connection lost', { error }));
  // So would a checked-out client's whose server goes away between statements (a switchover's
  // demoted primary): it crashed the process. Its next statement fails, and the client is closed.
  pool.on('connect', (client) => client.on('error', (error) => log.warn('database connection lost while in use', { error })));
  return pool;
}

/** The longest a statement is waited for before its connection is given up (and the statement retried by its caller). */
export const STATEMENT_TIMEOUT_MS = 15_000;

export class PostgresStore implements DeviceStore, TelemetryStore, ApplicationStore, ConnectionStateStore {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * One statement on a pooled connection. A connection whose statement failed for anything but
   * its data is closed rather than returned to the pool: after a failover it may lead to a
   * former primary now read-only, or to no server at all, and the next connection goes to the
   * primary of now.
   */
  private async query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      return await client.query<R>(text, values);
    } catch (error) {
      if (!isDataError(error)) broken = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      client.release(broken);
    }
  }

  async ping(): Promise<void> {
    await this.query('SELECT 1');
  }

  async reachesTables(tables: readonly Table[]): Promise<void> {
    for (const table of tables) {
      try {
        await this.query(`SELECT 1 FROM ${table} LIMIT 0`);
      } catch (error) {
        throw new Error(`table ${table} not there or not readable`, { cause: error });
      }
    }
  }

  async createDevice(id: string, passwordHash: string): Promise<boolean> {
    const result = await this.query('INSERT INTO devices (id, password_hash) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', [id, passwordHash]);
    return result.rowCount === 1;
  }

  async passwordHash(id: string): Promise<string | undefined> {
    const result = await this.query<{ password_hash: string }>('SELECT password_hash FROM devices WHERE id = $1', [id]);
    return result.rows[0]?.password_hash;
  }

  async setPasswordHash(id: string, passwordHash: string): Promise<boolean> {
    const result = await this.query('UPDATE devices SET password_hash = $2 WHERE id = $1', [id, passwordHash]);
    return result.rowCount === 1;
  }

  async deleteDevice(id: string): Promise<boolean> {
    const result = await this.query('DELETE FROM devices WHERE id = $1', [id]);
    return result.rowCount === 1;
  }

  async deviceState(id: string): Promise<DeviceState | undefined> {
    const result = await this.query<{ connected: boolean | null; last_seen: Date | null }>(
      `SELECT c.connected, GREATEST(c.last_seen, (SELECT max(received_at) FROM telemetry WHERE device_id = d.id)) AS last_seen
       FROM devices d LEFT JOIN device_connections c ON c.device_id = d.id WHERE d.id = $1`,
      [id],
    );
    const row = result.rows[0];
    return row && { id, connected: row.connected === true, lastSeen: row.last_seen?.toISOString() ?? null };
  }

  async recordConnection(event: ConnectionEvent): Promise<void> {
    if (event.state === 'refused') return;
    await this.query(
      `INSERT INTO device_connections AS d (device_id, connection_id, connected, changed_at, last_seen) VALUES ($1, $2, $3, $4, $4)
       ON CONFLICT (device_id) DO UPDATE SET
         connection_id = CASE WHEN excluded.connected AND excluded.changed_at >= d.changed_at THEN excluded.connection_id ELSE d.connection_id END,
         connected = CASE WHEN excluded.connected AND excluded.changed_at >= d.changed_at THEN true
                          WHEN NOT excluded.connected AND d.connection_id = excluded.connection_id THEN false
                          ELSE d.connected END,
         changed_at = GREATEST(d.changed_at, excluded.changed_at),
         last_seen = GREATEST(d.last_seen, excluded.last_seen)`,
      [event.deviceId, event.connectionId, event.state === 'connected', event.at],
    );
  }

  async createApplication(id: string, tokenHash: string): Promise<boolean> {
    const result = await this.query('INSERT INTO applications (id, token_hash) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', [id, tokenHash]);
    return result.rowCount === 1;
  }

  async applicationTokenHash(id: string): Promise<string | undefined> {
    const result = await this.query<{ token_hash: string }>('SELECT token_hash FROM applications WHERE id = $1', [id]);
    return result.rows[0]?.token_hash;
  }

  async deleteApplication(id: string): Promise<boolean> {
    const result = await this.query('DELETE FROM applications WHERE id = $1', [id]);
    return result.rowCount === 1;
  }

  async telemetry(deviceId: string, limit: number, before?: TelemetryCursor): Promise<TelemetryRecord[] | undefined> {
    const older = !before ? '' : before.messageId === undefined ? 'AND received_at < $3' : 'AND (received_at, message_id) < ($3, $4)';
    const parameters: unknown[] = [deviceId, limit];
    if (before) parameters.push(before.receivedAt);
    if (before?.messageId !== undefined) parameters.push(before.messageId);
    const result = await this.query<{ message_id: string; received_at: Date; stored_at: Date; payload: Payload }>(
      `SELECT message_id, received_at, stored_at, payload FROM telemetry WHERE device_id = $1 ${older} ORDER BY received_at DESC, message_id DESC LIMIT $2`,
      parameters,
    );
    if (result.rows.length === 0) {
      // An empty page: of a known device (registered, or with telemetry stored), or of none.
      const known = await this.query('SELECT 1 FROM devices WHERE id = $1 UNION ALL (SELECT 1 FROM telemetry WHERE device_id = $1 LIMIT 1) LIMIT 1', [deviceId]);
      return known.rowCount === 0 ? undefined : [];
    }
    return result.rows.map((row) => ({
      messageId: row.message_id,
      receivedAt: row.received_at.toISOString(),
      storedAt: row.stored_at.toISOString(),
      payload: row.payload,
    }));
  }

  async insertTelemetry(envelopes: readonly TelemetryEnvelope[]): Promise<number> {
    if (envelopes.length === 0) return 0;
    const result = await this.query(
      `INSERT INTO telemetry (device_id, message_id, received_at, payload)
       SELECT device_id, message_id, received_at, payload::jsonb FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[])
         AS batch (device_id, message_id, received_at, payload)
       ON CONFLICT (device_id, message_id) DO NOTHING`,
      [
        envelopes.map((e) => e.deviceId),
        envelopes.map((e) => e.messageId),
        envelopes.map((e) => e.receivedAt),
        envelopes.map((e) => JSON.stringify(e.payload)),
      ],
    );
    return result.rowCount ?? 0;
  }

  async deleteExpired(seconds: number, limit: number): Promise<number> {
    const expired = (table: string, time: string) =>
      this.query(`DELETE FROM ${table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM ${table} WHERE ${time} < now() - make_interval(secs => $1) LIMIT $2))`, [seconds, limit]);
    const [telemetry, letters] = [await expired('telemetry', 'received_at'), await expired('dead_letters', 'failed_at')];
    return (telemetry.rowCount ?? 0) + (letters.rowCount ?? 0);
  }

  async deadLetter(letter: DeadLetter): Promise<void> {
    await this.query('INSERT INTO dead_letters (device_id, message_id, message, error) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING', [
      letter.deviceId,
      letter.messageId,
      Buffer.from(letter.bytes),
      letter.error,
    ]);
  }
}
