/**
 * The shared context of one reconcile of one ArmadaChart, around which every action (install,
 * upgrade, test, uninstall, drift) works — as Flux's helm-controller splits its reconciler.
 *
 * Guarantees:
 * - `report` is the one place a chart's status is written (status.ts: kstatus conditions,
 *   conditional on the resourceVersion it was computed from, an Event on every transition); the
 *   working copy `chart` follows each write, so later writes of the same reconcile start from it.
 * - `helm` acts with the chart's authority (authority.ts: its ServiceAccount, impersonated) and
 *   is the only Helm that changes releases; `reader` (the operator's) only reads release state.
 *   Both are cancelled with the reconcile (`ctx.signal`: the operator stopping), so a slow
 *   release holds only its own worker and never outlives the operator.
 * - `requireFresh` fails (the reconcile is retried) unless the chart is the API server's current
 *   one: no Helm operation is decided on a stale status.
 * - `retryLater` reports a transient failure and schedules the next attempt after a growing
 *   delay recorded in `memory.retries`, which events do not bring forward; a deployed chart
 *   forgets its failures.
 * - `history` / `cacheShows` read a release's revisions from the operator's cache, waiting (at most
 *   15 s) for it to catch up with Helm's writes.
 */

import { Kinds, requeueAfter, type ConditionUpdate, type KubeObject, type ReconcileContext, type ReconcileResult } from '@iot-operator/runtime';
import { ArmadaChart, type ArmadaChartObject, type ChartStatus } from '../../api/armada.ts';
import type { Helm } from '../../helm/helm.ts';
import { releaseHistory, type ReleaseRevision } from '../../helm/release-state.ts';
import { nextStatus, writeStatus } from '../../status.ts';
import { chartReleasePrefix } from '../../ownership.ts';
import { authorityOf, describeAuthority, type AuthorityOptions } from '../authority.ts';
import { retryDelayMs } from '../failure.ts';
import type { ResolvedSource } from '../source.ts';

export type Conditions = ConditionUpdate[];
export type ChartState = NonNullable<ChartStatus['actual_state']>;

export const DEFAULT_WAIT_SECONDS = 900;
export const DEFAULT_TEST_SECONDS = 300;
export const DEFAULT_DELETE_SECONDS = 300;

/** What the chart controller remembers between reconciles, per chart (uid) unless said otherwise. */
export interface ChartMemory {
  /** Parsed `helm get manifest`, per release revision (`namespace/release/revision`). */
  manifests: Map<string, KubeObject[]>;
  /** The last drift repaired, to tell a persisting drift from a new one. */
  repairs: Map<string, { description: string; at: number }>;
  /** The resolved source per generation, and when: fetched again after `source.interval`. */
  resolved: Map<string, { generation: number; source: ResolvedSource; at: number }>;
  /** A source error that only a spec change can fix, per generation: not fetched again meanwhile. */
  badSources: Map<string, { generation: number; error: Error }>;
  /** Transient failures in a row, and when the next attempt is due. */
  retries: Map<string, { generation: number; failures: number; due: number }>;
}

export function newChartMemory(): ChartMemory {
  return { manifests: new Map(), repairs: new Map(), resolved: new Map(), badSources: new Map(), retries: new Map() };
}

/** Forgets a deleted chart. */
export function forget(memory: ChartMemory, uid: string): void {
  for (const map of [memory.repairs, memory.resolved, memory.badSources, memory.retries]) map.delete(uid);
}

export class ChartRun {
  readonly helm: Helm;
  readonly reader: Helm;
  /** The ServiceAccount user Helm acts as (`system:serviceaccount:<ns>:<name>`), if any. */
  readonly user: string | undefined;
  /** "ServiceAccount a/b" or "the operator": whose authority `helm` acts with. */
  readonly actingAs: string;
  /** The operator requires a ServiceAccount and the chart names none: Helm may not act for it. */
  readonly authorityMissing: boolean;
  /** The `release_prefix` of the manifest above the chart, if any: labelled on its release and recorded in its status. */
  readonly releasePrefix: string | undefined;

  constructor(
    readonly ctx: ReconcileContext,
    /** A working copy of the cached chart: status writes of this reconcile update it. */
    readonly chart: ArmadaChartObject,
    operatorHelm: Helm,
    authority: AuthorityOptions,
    readonly memory: ChartMemory,
  ) {
    const who = authorityOf(chart, authority);
    this.reader = operatorHelm.cancelledBy(ctx.signal);
    this.user = who.kind === 'service-account' ? who.user : undefined;
    this.helm = this.user ? this.reader.as(this.user) : this.reader;
    this.actingAs = describeAuthority(who);
    this.authorityMissing = who.kind === 'none';
    this.releasePrefix = chartReleasePrefix(ctx.cache, chart);
  }

  /** " as ServiceAccount a/b" when Helm acts as an account, "" when as the operator: for reasons and Events. */
  get asWho(): string {
    return this.user ? ` as ${this.actingAs}` : '';
  }

  get uid(): string {
    return this.chart.metadata.uid!;
  }

  event(type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.ctx.recorder.event(this.chart, type, reason, message);
  }

  /**
   * The one place that writes the chart's status. `stalled` names why the chart cannot progress
   * until its spec changes (kstatus `Stalled`); fields given as undefined are removed. The status
   * records the release prefix this reconcile worked with, so that a parent counts the chart
   * deployed only under its own prefix.
   */
  async report(state: ChartState, reason: string | undefined, fields: Partial<ChartStatus> = {}, conditions: Conditions = [], stalled?: string): Promise<void> {
    const chart = this.chart;
    if (state === 'deployed') this.memory.retries.delete(this.uid);
    fields = { release_prefix: this.releasePrefix, ...fields };
    const next = nextStatus<ChartStatus>(ArmadaChart, chart, state, reason, fields, conditions, stalled);
    for (const [key, value] of Object.entries(fields)) if (value === undefined) delete (next as Record<string, unknown>)[key];
    const written = await writeStatus(this.ctx, ArmadaChart, chart, next);
    chart.metadata = written.metadata;
    chart.status = written === chart ? next : written.status;
  }

  /** A transient failure: reported, and the reconcile retried after a growing delay (10 s … 5 min). */
  async retryLater(state: 'error' | 'failed', reason: string, fields: Partial<ChartStatus> = {}, conditions: Conditions = []): Promise<ReconcileResult> {
    const generation = this.chart.metadata.generation ?? 0;
    const previous = this.memory.retries.get(this.uid);
    const failures = (previous?.generation === generation ? previous.failures : 0) + 1;
    const delay = retryDelayMs(failures);
    this.memory.retries.set(this.uid, { generation, failures, due: Date.now() + delay });
    await this.report(state, `${reason} (attempt ${failures}, retrying in ${delay / 1000} s)`, fields, conditions);
    return requeueAfter(delay);
  }

  /** The kstatus reason the chart is stalled with now, if any. */
  stalledReason(): string | undefined {
    return this.chart.status?.conditions?.find((c) => c.type === 'Stalled' && c.status === 'True')?.reason;
  }

  async requireFresh(): Promise<void> {
    const { chart, ctx } = this;
    const current = await ctx.client.get(ArmadaChart, chart.metadata.name!, chart.metadata.namespace);
    if (current.metadata.resourceVersion !== chart.metadata.resourceVersion) {
      throw new Error(`the cached ArmadaChart ${chart.metadata.namespace}/${chart.metadata.name} is stale (${chart.metadata.resourceVersion} vs ${current.metadata.resourceVersion}); retrying before any Helm operation`);
    }
  }

  history(namespace: string, release: string): ReleaseRevision[] {
    return releaseHistory(this.ctx.cache.list(Kinds.Secret, { namespace }), release);
  }

  /** Waits (at most 15 s) until the cached release history satisfies `done`: the cache lags Helm's writes. */
  async cacheShows(namespace: string, release: string, done: (history: ReleaseRevision[]) => boolean): Promise<void> {
    const deadline = Date.now() + 15_000;
    while (!done(this.history(namespace, release)) && Date.now() < deadline && !this.ctx.signal.aborted) await new Promise((r) => setTimeout(r, 100));
  }
}
