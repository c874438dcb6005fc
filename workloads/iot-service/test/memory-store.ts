/**
 * An in-memory stand-in for the PostgreSQL store in unit tests.
 *
 * Guarantees: the same contract as PostgresStore (store.ts): devices keyed by id (a deleted
 * device's telemetry kept and still listed), telemetry keyed by (device id, message id) with inserts of a stored key changing nothing, newest first and
 * paged by cursor (message ids compared by code unit, as PostgreSQL's C collation does), a batch
 * stored whole or not at all; a payload with a NUL character is refused with SQLSTATE 22P05, as
 * PostgreSQL's jsonb refuses it; `failNextInserts(n)` makes the next n inserts reject, as a
 * database that is away would; dead letters are kept by (device id, message id); `deleteExpired`
 * deletes at most `limit` rows received before the cutoff; applications' token hashes keyed by id; connection states as
 * PostgresStore's `recordConnection` keeps them (times compared as ISO 8601 text, all UTC).
 */

import type { ConnectionEvent } from '../src/shared/events.ts';
import type { ApplicationStore, ConnectionStateStore, DeadLetter, DeviceState, DeviceStore, TelemetryCursor, TelemetryRecord, TelemetryStore } from '../src/shared/store.ts';
import type { TelemetryEnvelope } from '../src/shared/telemetry.ts';

export class MemoryStore implements DeviceStore, TelemetryStore, ApplicationStore, ConnectionStateStore {
  readonly connections = new Map<string, { connectionId: string; connected: boolean; changedAt: string; lastSeen: string }>();
  readonly devices = new Map<string, string>();
  readonly applications = new Map<string, string>();
  readonly rows = new Map<string, TelemetryEnvelope>();
  readonly deadLetters = new Map<string, DeadLetter>();
  private readonly storedAt = new Map<string, string>();
  insertAttempts = 0;
  private failures = 0;

  failNextInserts(count: number): void {
    this.failures = count;
  }

  async createDevice(id: string, passwordHash: string): Promise<boolean> {
    if (this.devices.has(id)) return false;
    this.devices.set(id, passwordHash);
    return true;
  }

  async passwordHash(id: string): Promise<string | undefined> {
    return this.devices.get(id);
  }

  async setPasswordHash(id: string, passwordHash: string): Promise<boolean> {
    if (!this.devices.has(id)) return false;
    this.devices.set(id, passwordHash);
    return true;
  }

  async deleteDevice(id: string): Promise<boolean> {
    return this.devices.delete(id);
  }

  async recordConnection(event: ConnectionEvent): Promise<void> {
    if (event.state === 'refused') return;
    const now = this.connections.get(event.deviceId);
    const connects = event.state === 'connected' && (!now || event.at >= now.changedAt);
    this.connections.set(event.deviceId, {
      connectionId: connects || !now ? event.connectionId : now.connectionId,
      connected: connects || (now !== undefined && now.connected && now.connectionId !== event.connectionId),
      changedAt: !now || event.at > now.changedAt ? event.at : now.changedAt,
      lastSeen: !now || event.at > now.lastSeen ? event.at : now.lastSeen,
    });
  }

  async deviceState(id: string): Promise<DeviceState | undefined> {
    if (!this.devices.has(id)) return undefined;
    const seen = [this.connections.get(id)?.lastSeen, ...[...this.rows.values()].filter((row) => row.deviceId === id).map((row) => row.receivedAt)].filter((t) => t !== undefined).sort();
    return { id, connected: this.connections.get(id)?.connected ?? false, lastSeen: seen.at(-1) ?? null };
  }

  async createApplication(id: string, tokenHash: string): Promise<boolean> {
    if (this.applications.has(id)) return false;
    this.applications.set(id, tokenHash);
    return true;
  }

  async applicationTokenHash(id: string): Promise<string | undefined> {
    return this.applications.get(id);
  }

  async deleteApplication(id: string): Promise<boolean> {
    return this.applications.delete(id);
  }

  async telemetry(deviceId: string, limit: number, before?: TelemetryCursor): Promise<TelemetryRecord[] | undefined> {
    if (!this.devices.has(deviceId) && ![...this.rows.values()].some((row) => row.deviceId === deviceId)) return undefined;
    const compare = (a: { receivedAt: string; messageId: string }, b: { receivedAt: string; messageId: string }) =>
      b.receivedAt.localeCompare(a.receivedAt) || (b.messageId < a.messageId ? -1 : b.messageId > a.messageId ? 1 : 0);
    const older = (row: TelemetryEnvelope) =>
      !before || row.receivedAt < before.receivedAt || (before.messageId !== undefined && row.receivedAt === before.receivedAt && row.messageId < before.messageId);
    return [...this.rows.values()]
      .filter((row) => row.deviceId === deviceId && older(row))
      .sort(compare)
      .slice(0, limit)
      .map(({ messageId, receivedAt, payload }) => ({ messageId, receivedAt, storedAt: this.storedAt.get(JSON.stringify([deviceId, messageId]))!, payload }));
  }

  async insertTelemetry(envelopes: readonly TelemetryEnvelope[]): Promise<number> {
    this.insertAttempts++;
    if (this.failures > 0) {
      this.failures--;
      throw new Error('database unavailable');
    }
    if (envelopes.some((e) => JSON.stringify(e.payload).includes('\\u0000'))) {
      throw Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' });
    }
    let added = 0;
    for (const envelope of envelopes) {
      const key = JSON.stringify([envelope.deviceId, envelope.messageId]);
      if (this.rows.has(key)) continue;
      this.rows.set(key, envelope);
      this.storedAt.set(key, new Date().toISOString());
      added++;
    }
    return added;
  }

  async deleteExpired(seconds: number, limit: number): Promise<number> {
    const cutoff = new Date(Date.now() - seconds * 1000).toISOString();
    const expired = [...this.rows.entries()].filter(([, row]) => row.receivedAt < cutoff).slice(0, limit);
    for (const [key] of expired) this.rows.delete(key);
    return expired.length;
  }

  async deadLetter(letter: DeadLetter): Promise<void> {
    const key = JSON.stringify([letter.deviceId, letter.messageId]);
    if (!this.deadLetters.has(key)) this.deadLetters.set(key, letter);
  }
}
