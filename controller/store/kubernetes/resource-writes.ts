/**
 * The Kubernetes store's writes of routers (their identities reserved first, router-ids.ts; the agent
 * token hash in a Secret), routing policies and token revocations, each persisting what the core judged
 * (../core/backend.ts). A write refused at the resourceVersion it read throws StaleObject: the back end
 * re-reads the object and runs the attempt again.
 */
import type pino from 'pino';
import { acceptedConditions, atGeneration } from '../../../common/conditions.ts';
import { isoNow } from '../../../common/clock.ts';
import {
  GROUP_VERSION,
  type PolicySpec,
  type PolicyStatus,
  type RouterSpec,
  type RouterStatus,
} from '../../../common/schema.ts';
import type {
  Judged,
  NewRouter,
  PolicyPut,
  RevocationsPut,
  RouterUpdate,
  TokenHash,
} from '../core/backend.ts';
import type { RevocationList } from '../core/revocations.ts';
import { policyNotFound, routerExists, routerNotFound } from '../core/refusals.ts';
import type { Actor, Policy, Router } from '../store.ts';
import { isAlreadyExists, isConflict, isNotFound, storeError, type KubeApi } from './api.ts';
import { audit, withAudit, type AuditEvents } from './audit.ts';
import { StaleObject, type KubeObjects, type PolicyResource, type RouterResource } from './objects.ts';
import type { RouterIds } from './router-ids.ts';

export interface ResourceWriteParts {
  api: KubeApi;
  objects: KubeObjects;
  routerIds: RouterIds;
  events: AuditEvents;
  log: pino.Logger;
}

export class ResourceWrites {
  private readonly api: KubeApi;
  private readonly objects: KubeObjects;
  private readonly routerIds: RouterIds;
  private readonly events: AuditEvents;
  private readonly log: pino.Logger;

  constructor(parts: ResourceWriteParts) {
    this.api = parts.api;
    this.objects = parts.objects;
    this.routerIds = parts.routerIds;
    this.events = parts.events;
    this.log = parts.log;
  }

  // ---------------------------------------------------------------- routers

  async newRouter({ name, spec: value }: Judged<NewRouter>, actor: Actor): Promise<Router> {
    await this.routerIds.reserve(name, value);
    const { agentTokenSha256: hash, ...stored } = value;
    let created: RouterResource;
    try {
      created = await this.api.create<RouterSpec, RouterStatus>('Router', {
        apiVersion: GROUP_VERSION,
        kind: 'Router',
        metadata: { name, annotations: audit(actor, `add router ${name}`) },
        spec: stored,
      });
    } catch (err) {
      // on AlreadyExists the entries are the existing router's (same name), so they stay
      if (isAlreadyExists(err)) throw routerExists(name);
      await this.routerIds.release(name, value).catch(() => undefined);
      throw storeError(err, `create router ${name}`);
    }
    this.objects.applyPut('Router', created);
    if (hash !== undefined) {
      try {
        this.objects.applyToken(await this.api.putTokenHash(name, hash));
      } catch (err) {
        // its agent could never authenticate, and the token was never shown: the add is taken back
        await this.api.delete('Router', name).catch(() => undefined);
        this.objects.applyDelete('Router', created);
        await this.routerIds.release(name, value).catch(() => undefined);
        throw storeError(err, `store the agent token hash of router ${name}; the router was not added`);
      }
    }
    this.events.record(created, 'Created', actor, `add router ${name}`);
    return this.objects.routerNamed(name);
  }

  async routerUpdate(
    { current: { name, spec: before }, spec: value }: Judged<RouterUpdate>,
    actor: Actor,
    message: string,
  ): Promise<Router> {
    const current = this.objects.router(name);
    if (!current) throw routerNotFound(name);
    const newIdentity = value.nodeId !== before.nodeId || value.uuid !== before.uuid;
    if (newIdentity) await this.routerIds.reserve(name, value, before);
    const { agentTokenSha256: hash, ...stored } = value;
    try {
      const updated = await this.api.replace<RouterSpec, RouterStatus>('Router', {
        ...current,
        metadata: withAudit(current.metadata, actor, message),
        spec: stored,
      });
      this.objects.applyPut('Router', updated);
      if (newIdentity) await this.routerIds.release(name, before).catch(() => undefined);
      if (hash !== undefined && hash !== before.agentTokenSha256)
        this.objects.applyToken(await this.api.putTokenHash(name, hash));
      this.events.record(updated, 'Updated', actor, message);
      return this.objects.routerNamed(name);
    } catch (err) {
      const release = () =>
        newIdentity ? this.routerIds.release(name, value).catch(() => undefined) : Promise.resolve();
      if (isConflict(err))
        throw new StaleObject({ kind: 'Router', name }, storeError(err, `update router ${name}`), release);
      await release();
      if (isNotFound(err)) throw routerNotFound(name);
      throw storeError(err, `update router ${name}`);
    }
  }

  async routerRemoval({ name }: Judged<Router>, actor: Actor): Promise<void> {
    const current = this.objects.router(name);
    if (!current) throw routerNotFound(name);
    try {
      await this.api.delete('Router', name);
      await this.api.deleteTokenHash(name);
    } catch (err) {
      if (!isNotFound(err)) throw storeError(err, `delete router ${name}`);
    }
    await this.routerIds
      .release(name, current.spec)
      .catch((err: unknown) => this.log.warn({ err, router: name }, 'router identity not released'));
    this.log.info({ router: name, actor: actor.name }, 'router deleted');
    this.events.record(current, 'Deleted', actor, `remove router ${name}`);
    this.objects.forgetToken(name);
    this.objects.applyDelete('Router', current);
  }

  async tokenHash({ router: { name: router }, sha256 }: Judged<TokenHash>, actor: Actor): Promise<void> {
    try {
      this.objects.applyToken(await this.api.putTokenHash(router, sha256));
    } catch (err) {
      throw storeError(err, `set the agent token of router ${router}`);
    }
    this.log.info({ router, actor: actor.name }, 'agent token set');
    const resource = this.objects.router(router);
    if (resource)
      this.events.record(resource, 'AgentTokenSet', actor, `set the agent token of router ${router}`);
  }

  // ---------------------------------------------------------------- policies

  async policy({ name, spec: value }: Judged<PolicyPut>, actor: Actor): Promise<Policy> {
    const current = this.objects.policy(name);
    try {
      const written = current
        ? await this.api.replace<PolicySpec, PolicyStatus>('RoutingPolicy', {
            ...current,
            metadata: withAudit(current.metadata, actor, `set policy ${name}`),
            spec: value,
          })
        : await this.api.create<PolicySpec, PolicyStatus>('RoutingPolicy', {
            apiVersion: GROUP_VERSION,
            kind: 'RoutingPolicy',
            metadata: { name, annotations: audit(actor, `set policy ${name}`) },
            spec: value,
          });
      this.objects.applyPut('RoutingPolicy', written);
      await this.acceptPolicy(written);
      this.events.record(written, current ? 'Updated' : 'Created', actor, `set policy ${name}`);
      return this.objects.policyNamed(name) ?? { name, spec: written.spec };
    } catch (err) {
      // written meanwhile, created or deleted by another: read it again, then replace or create
      if (isConflict(err) || isAlreadyExists(err) || isNotFound(err))
        throw new StaleObject({ kind: 'RoutingPolicy', name }, storeError(err, `set policy ${name}`));
      throw storeError(err, `set policy ${name}`);
    }
  }

  /**
   * A policy's status says the controller accepted its generation (Ready, docs/kubernetes.md). Best
   * effort: the policy is written either way, and a role without routingpolicies/status only loses this.
   */
  private async acceptPolicy(written: PolicyResource): Promise<void> {
    const status = atGeneration(
      { conditions: acceptedConditions(written.status?.conditions, isoNow()) },
      written.metadata.generation,
    );
    try {
      this.objects.applyPut(
        'RoutingPolicy',
        await this.api.patchStatus<PolicySpec, PolicyStatus>('RoutingPolicy', written.metadata.name, status),
      );
    } catch (err) {
      this.log.warn({ err, policy: written.metadata.name }, 'policy status not written');
    }
  }

  async policyRemoval({ name }: Judged<Policy>, actor: Actor): Promise<void> {
    const current = this.objects.policy(name);
    if (!current) throw policyNotFound(name);
    try {
      await this.api.delete('RoutingPolicy', name);
    } catch (err) {
      if (isNotFound(err)) throw policyNotFound(name);
      throw storeError(err, `delete policy ${name}`);
    }
    this.events.record(current, 'Deleted', actor, `remove policy ${name}`);
    this.objects.applyDelete('RoutingPolicy', current);
  }

  // ---------------------------------------------------------------- token revocations

  /** The list judged on the one read last (another replica wrote first: its list, and this on top). */
  async revocations({ list, message }: Judged<RevocationsPut>, actor: Actor): Promise<RevocationList> {
    try {
      this.objects.applyRevocations(
        await this.api.putRevocations(
          JSON.stringify(list),
          this.objects.revocationsObject(),
          audit(actor, message),
        ),
      );
      return list;
    } catch (err) {
      if (isConflict(err) || isAlreadyExists(err))
        throw new StaleObject('revocations', storeError(err, 'store the token revocations'));
      throw storeError(err, 'store the token revocations');
    }
  }
}
