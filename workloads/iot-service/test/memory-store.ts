/**
 * An in-memory stand-in for the PostgreSQL store in unit tests.
 *
 * Guarantees: the same contract as PostgresStore (store.ts): devices keyed by id, telemetry keyed
 * by (device id, message id) with inserts of a stored key changing nothing, newest first;
 * `failNextInserts(n)` makes the next n inserts reject, as a database that is away would.
 */

import type { DeviceStore, TelemetryRecord, TelemetryStore } from '../src/shared/store.ts';
import type { TelemetryEnvelope } from '../src/shared/telemetry.ts';

export class MemoryStore implements DeviceStore, TelemetryStore {
  readonly devices = new Map<string, string>();
  readonly rows = new Map<string, TelemetryEnvelope>();
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

  async telemetry(deviceId: string, limit: number): Promise<TelemetryRecord[] | undefined> {
    if (!this.devices.has(deviceId)) return undefined;
    return [...this.rows.values()]
      .filter((row) => row.deviceId === deviceId)
      .sort((a, b) => b.receivedAt.localeCompare(a.receivedAt) || b.messageId.localeCompare(a.messageId))
      .slice(0, limit)
      .map(({ messageId, receivedAt, payload }) => ({ messageId, receivedAt, payload }));
  }

  async insertTelemetry(envelope: TelemetryEnvelope): Promise<boolean> {
    this.insertAttempts++;
    if (this.failures > 0) {
      this.failures--;
      throw new Error('database unavailable');
    }
    const key = JSON.stringify([envelope.deviceId, envelope.messageId]);
    if (this.rows.has(key)) return false;
    this.rows.set(key, envelope);
    return true;
  }
}
