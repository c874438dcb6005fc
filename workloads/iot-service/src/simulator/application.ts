/**
 * What an application does with core's API: gets a credential of its own and follows the events
 * stream (`GET /v1/stream`, Server-Sent Events), resuming where it left off.
 *
 * Guarantees: `issueApplication` / `revokeApplication` call `POST /v1/applications` and
 * `DELETE /v1/applications/<id>` with the api token, rejecting with HttpStatusError on any other
 * status than 201 / 204. `followEvents` opens the stream with the application's token — after
 * `lastEventId` (sent as `Last-Event-ID`) or else from `from` —, calls `onEvent` with each event in
 * the order core sends them, and resolves with the id of the last event (or of the opening
 * position core sent; `onPosition` is told each as it comes) once the stream ends — core ended it,
 * the connection broke, or `signal` aborted; a refusal rejects with HttpStatusError, an unreachable core with fetch's error. Calling it again with that id misses nothing: the caller's resume.
 */

import { HttpStatusError } from './transport.ts';
import type { ServiceAddresses } from './types.ts';

export interface StreamedEvent {
  /** The stream sequence: what to resume after. */
  id: string;
  /** `telemetry` or `connection`. */
  type: string;
  data: Record<string, unknown>;
}

export interface FollowOptions {
  token: string;
  devices?: readonly string[];
  lastEventId?: string;
  /** RFC 3339: where to start when there is no `lastEventId`. */
  from?: string;
  signal?: AbortSignal;
  /** Told each position core sends, the opening one and each event's: where a resume would start. */
  onPosition?: (id: string) => void;
}

export async function issueApplication(addresses: Pick<ServiceAddresses, 'coreUrl' | 'apiToken'>, id: string): Promise<{ id: string; token: string }> {
  const response = await fetch(new URL('/v1/applications', addresses.coreUrl), {
    method: 'POST',
    headers: { Authorization: `Bearer ${addresses.apiToken}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ id }),
  });
  const text = await response.text();
  if (response.status !== 201) throw new HttpStatusError(response.status, text, `issue application ${id}`);
  return JSON.parse(text) as { id: string; token: string };
}

export async function revokeApplication(addresses: Pick<ServiceAddresses, 'coreUrl' | 'apiToken'>, id: string): Promise<void> {
  const response = await fetch(new URL(`/v1/applications/${encodeURIComponent(id)}`, addresses.coreUrl), { method: 'DELETE', headers: { Authorization: `Bearer ${addresses.apiToken}` } });
  if (response.status !== 204) throw new HttpStatusError(response.status, await response.text(), `revoke application ${id}`);
}

export async function followEvents(coreUrl: string, options: FollowOptions, onEvent: (event: StreamedEvent) => void): Promise<string | undefined> {
  const url = new URL('/v1/stream', coreUrl);
  for (const device of options.devices ?? []) url.searchParams.append('device', device);
  if (options.from !== undefined && options.lastEventId === undefined) url.searchParams.set('from', options.from);
  const headers: Record<string, string> = { Authorization: `Bearer ${options.token}`, Accept: 'text/event-stream' };
  if (options.lastEventId !== undefined) headers['Last-Event-ID'] = options.lastEventId;
  let lastEventId = options.lastEventId;
  let response: Response;
  try {
    response = await fetch(url, { headers, signal: options.signal });
  } catch (error) {
    if (options.signal?.aborted) return lastEventId;
    throw error;
  }
  if (response.status !== 200 || !response.body) throw new HttpStatusError(response.status, await response.text(), 'follow events');
  const decoder = new TextDecoder();
  let buffered = '';
  try {
    for await (const chunk of response.body) {
      buffered += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const fields = new Map<string, string>();
        for (const line of block.split('\n')) {
          const colon = line.indexOf(':');
          if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trimStart());
        }
        const id = fields.get('id');
        if (id !== undefined) {
          lastEventId = id;
          options.onPosition?.(id);
        }
        const data = fields.get('data');
        if (id !== undefined && data !== undefined) onEvent({ id, type: fields.get('event') ?? 'message', data: JSON.parse(data) as Record<string, unknown> });
      }
    }
  } catch {
    // The connection broke (core stopped, the network): the stream ended; resume after lastEventId.
  }
  return lastEventId;
}
