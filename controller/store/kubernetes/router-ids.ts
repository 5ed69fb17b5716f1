/**
 * Router identities (nodeId and uuid) unique across controller replicas. Each replica checks its own
 * index first, but two replicas can pass that check at the same instant with the same nodeId. So one
 * ConfigMap maps every identity to the router that holds it, and every change to it is a replace with the
 * resourceVersion read: of two replicas reserving the same nodeId, one write fails with 409, re-reads, and
 * sees the other's entry. Router writes are rare admin actions, so serialising them through one object
 * costs nothing (session ports use one claim object per port because session creates are frequent).
 *
 * An entry names its router and when it was written. A reservation is written before the Router object,
 * so an entry whose router does not exist, or no longer has that identity, may be a write in flight on
 * another replica; it counts as stale (a crash between the two writes) only after the grace period.
 */
import type { V1ConfigMap } from '@kubernetes/client-node';
import type pino from 'pino';
import { type FieldError } from '../../../common/errors.ts';
import type { RouterSpec } from '../../../common/schema.ts';
import { isAlreadyExists, isConflict, storeError, type KubeApi } from './api.ts';
import { fault, fieldError } from '../../../common/messages.ts';

type Identity = Pick<RouterSpec, 'nodeId' | 'uuid'>;

interface Held {
  router: string;
  at: string;
}

const MAX_ATTEMPTS = 20;

/** The ConfigMap keys of a router's identities, with the field each comes from. */
function keysOf(spec: Identity): { key: string; pointer: string; label: string; value: string }[] {
  return [
    { key: `node-${spec.nodeId}`, pointer: '/spec/nodeId', label: 'nodeId', value: String(spec.nodeId) },
    { key: `uuid-${spec.uuid}`, pointer: '/spec/uuid', label: 'uuid', value: spec.uuid },
  ];
}

/** An entry's holder; a bare router name (written by hand) counts as an entry of unknown age. */
function parseHeld(value: string | undefined): Held | undefined {
  if (!value?.trim()) return undefined;
  try {
    const held = JSON.parse(value) as Partial<Held>;
    if (typeof held.router === 'string') return { router: held.router, at: String(held.at) };
  } catch {
    // not JSON: a bare name
  }
  return { router: value.trim(), at: '' };
}

export class RouterIds {
  private readonly api: KubeApi;
  private readonly staleMs: number;
  /** The router's identity as the API server has it now (not the index, which may lag). */
  private readonly liveIdentity: (router: string) => Promise<Identity | undefined>;
  private readonly log: pino.Logger;

  constructor(
    api: KubeApi,
    staleMs: number,
    liveIdentity: (router: string) => Promise<Identity | undefined>,
    log: pino.Logger,
  ) {
    this.api = api;
    this.staleMs = staleMs;
    this.liveIdentity = liveIdentity;
    this.log = log;
  }

  /**
   * Reserves `spec`'s identities for router `name`; `keep` (its identity before an update) stays held
   * until release. CONFLICT, naming the field, when another router holds one of them.
   */
  async reserve(name: string, spec: Identity, keep?: Identity): Promise<void> {
    const wanted = keysOf(spec);
    const kept = new Set([...wanted, ...(keep ? keysOf(keep) : [])].map((k) => k.key));
    await this.modify(`reserve the identity of router ${name}`, async (data) => {
      const errors: FieldError[] = [];
      for (const { key, pointer, label, value } of wanted) {
        const held = parseHeld(data[key]);
        if (!held || held.router === name || (await this.isStale(key, held))) continue;
        errors.push(fieldError(pointer, 'field.identityTaken', { field: label, value, router: held.router }));
      }
      if (errors.length > 0)
        throw fault('router.conflict', { name, reason: errors[0]?.message ?? '' }, errors);
      const at = new Date().toISOString();
      const next: Record<string, string> = {};
      // entries of this name it no longer uses (a failed write before) go; the wanted ones are (re)written
      for (const [key, value] of Object.entries(data))
        if (parseHeld(value)?.router !== name || kept.has(key)) next[key] = value;
      for (const { key } of wanted) next[key] = JSON.stringify({ router: name, at } satisfies Held);
      return next;
    });
  }

  /** Drops the entries of `identity` that router `name` holds; others' entries stay untouched. */
  async release(name: string, identity: Identity): Promise<void> {
    await this.modify(`release the identity of router ${name}`, async (data) => {
      const next = { ...data };
      for (const { key } of keysOf(identity)) if (parseHeld(next[key])?.router === name) delete next[key];
      return next;
    });
  }

  /** Records the identities of routers that have no entry yet (created before this map existed). */
  async backfill(routers: { name: string; spec: Identity }[]): Promise<void> {
    await this.modify('record the identities of existing routers', async (data) => {
      const next = { ...data };
      const at = new Date().toISOString();
      for (const router of routers)
        for (const { key, label, value } of keysOf(router.spec)) {
          const held = parseHeld(next[key]);
          if (!held) next[key] = JSON.stringify({ router: router.name, at } satisfies Held);
          else if (held.router !== router.name)
            this.log.warn(
              { router: router.name, holder: held.router },
              `${label} ${value} is used by two routers`,
            );
        }
      return next;
    });
  }

  private async isStale(key: string, held: Held): Promise<boolean> {
    const at = Date.parse(held.at);
    // an entry without a readable time (edited by hand) is old, not in flight forever
    if (!Number.isNaN(at) && Date.now() - at < this.staleMs) return false;
    const live = await this.liveIdentity(held.router);
    return !live || !keysOf(live).some((k) => k.key === key);
  }

  /** Read, change, write with the resourceVersion read; a concurrent write re-runs the change. */
  private async modify(
    what: string,
    change: (data: Record<string, string>) => Promise<Record<string, string>>,
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      let current: V1ConfigMap | undefined;
      try {
        current = await this.api.readRouterIds();
        const data = current?.data ?? {};
        const next = await change(data);
        if (JSON.stringify(next) === JSON.stringify(data)) return;
        await this.api.writeRouterIds(current, next);
        return;
      } catch (err) {
        if ((isConflict(err) || isAlreadyExists(err)) && attempt < MAX_ATTEMPTS) continue;
        throw storeError(err, what);
      }
    }
  }
}
