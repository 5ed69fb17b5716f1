/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: the holder renews the lease
 * every renewInterval; another candidate takes it over once it has gone unrenewed for leaseDuration. Every
 * replica serves the REST API; only the leader runs the reconciler (onStartedLeading/onStoppedLeading).
 * Candidates judge expiry on their own clock, from when they last saw the record change (as client-go),
 * and a leader that has not renewed for a lease duration stops leading on its own.
 */
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import pino from 'pino';
import { isAlreadyExists, isConflict, isNotFound } from './api.ts';
import { pooledConnections } from './connections.ts';

export interface LeaderElectorOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** Lease name, e.g. `peerops-controller`. */
  name: string;
  /** This replica's identity (the pod name). */
  identity: string;
  /** How long a lease is valid without renewal; default 15 s. */
  leaseDurationSeconds?: number;
  /** How often the leader renews and candidates retry; default leaseDuration / 3. */
  retryIntervalMs?: number;
  onStartedLeading: () => void | Promise<void>;
  onStoppedLeading: () => void | Promise<void>;
  logger?: pino.Logger;
}

export class LeaderElector {
  private readonly api: CoordinationV1Api;
  private readonly options: LeaderElectorOptions;
  private readonly durationMs: number;
  private readonly retryMs: number;
  private readonly log: pino.Logger;
  private timer: NodeJS.Timeout | undefined;
  private leading = false;
  /** When this replica last renewed successfully (its own clock). */
  private renewedAt = 0;
  private running = false;
  /** The lease record last seen and when (own clock): expiry is judged from that, never from another node's clock. */
  private observed: { record: string; at: number } | undefined;
  private tick: Promise<void> = Promise.resolve();

  constructor(options: LeaderElectorOptions) {
    this.options = options;
    this.api = pooledConnections(options.kubeConfig).makeApiClient(CoordinationV1Api);
    this.durationMs = (options.leaseDurationSeconds ?? 15) * 1000;
    this.retryMs = options.retryIntervalMs ?? Math.max(200, Math.floor(this.durationMs / 3));
    this.log = (options.logger ?? pino({ level: 'silent' })).child({
      lease: options.name,
      identity: options.identity,
    });
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    const loop = () => {
      this.tick = this.tick.then(() => this.attempt());
      void this.tick.then(() => {
        if (this.running) this.timer = setTimeout(loop, this.retryMs);
      });
    };
    loop();
  }

  /** Stop renewing; with release (the default) the lease is handed back at once so another replica takes over. */
  async stop(options: { release?: boolean } = {}): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.tick;
    if (this.leading && options.release !== false) await this.release();
    if (this.leading) await this.setLeading(false);
  }

  private async attempt(): Promise<void> {
    const startedAt = Date.now();
    // a leader that has not renewed for a whole lease may already have been replaced
    if (this.leading && startedAt - this.renewedAt > this.durationMs) await this.setLeading(false);
    try {
      const ok = await this.acquireOrRenew();
      if (ok) {
        this.renewedAt = startedAt;
        if (!this.leading) await this.setLeading(true);
      } else if (this.leading) await this.setLeading(false);
    } catch (err) {
      this.log.warn({ err }, 'lease not renewed');
      // could not reach the API server: give up leading before the lease can expire for the others
      if (this.leading && Date.now() - this.renewedAt > this.durationMs - this.retryMs)
        await this.setLeading(false);
    }
  }

  private async setLeading(leading: boolean): Promise<void> {
    this.leading = leading;
    this.log.info({ leading }, leading ? 'started leading' : 'stopped leading');
    try {
      await (leading ? this.options.onStartedLeading() : this.options.onStoppedLeading());
    } catch (err) {
      this.log.error({ err }, 'leader callback failed');
    }
  }

  private spec(acquireTime: Date, transitions: number): V1Lease['spec'] {
    return {
      holderIdentity: this.options.identity,
      leaseDurationSeconds: Math.ceil(this.durationMs / 1000),
      acquireTime: new V1MicroTime(acquireTime.getTime()),
      renewTime: new V1MicroTime(),
      leaseTransitions: transitions,
    };
  }

  /** True when this replica holds the lease after the call. */
  private async acquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.options;
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await this.api.createNamespacedLease({
          namespace,
          body: { metadata: { name, namespace }, spec: this.spec(new Date(), 0) },
        });
        return true;
      } catch (createErr) {
        if (isAlreadyExists(createErr)) return false;
        throw createErr;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const duration = (spec.leaseDurationSeconds ?? 0) * 1000;
    const mine = holder === identity;
    // as client-go: the lease has expired when its record has not changed for a lease duration on this
    // replica's clock (renewTime comes from the holder's clock, which may be skewed)
    const record = `${holder}@${spec.renewTime ? new Date(spec.renewTime).toISOString() : ''}`;
    if (this.observed?.record !== record) this.observed = { record, at: Date.now() };
    if (!mine && holder !== '' && this.observed.at + duration > Date.now()) return false;
    const acquired = mine && spec.acquireTime ? new Date(spec.acquireTime) : new Date();
    const transitions = (spec.leaseTransitions ?? 0) + (mine ? 0 : 1);
    try {
      await this.api.replaceNamespacedLease({
        name,
        namespace,
        body: { ...lease, spec: this.spec(acquired, transitions) },
      });
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
  }

  private async release(): Promise<void> {
    const { namespace, name, identity } = this.options;
    try {
      const lease = await this.api.readNamespacedLease({ name, namespace });
      if (lease.spec?.holderIdentity !== identity) return;
      await this.api.replaceNamespacedLease({
        name,
        namespace,
        body: {
          ...lease,
          spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: new V1MicroTime() },
        },
      });
    } catch (err) {
      this.log.warn({ err }, 'lease not released; it expires after its duration');
    }
  }
}
