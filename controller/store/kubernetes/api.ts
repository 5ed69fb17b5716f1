/**
 * The Kubernetes calls of the store: peerops custom resources (routers' and policies' status through the
 * status subresource; a session's spec and status are one object, written in one call), port-claim and
 * outbox-record ConfigMaps, the router-identity ConfigMap and agent-token Secrets, with the API server's
 * failures mapped onto the store's errors.
 */
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
  type V1ConfigMap,
  type V1ObjectMeta,
  type V1Secret,
} from '@kubernetes/client-node';
import { DomainError } from '../../../common/errors.ts';
import { pooledConnections } from './connections.ts';
import { API_GROUP, API_VERSION, GROUP_VERSION, KINDS, type Kind } from '../../../common/schema.ts';
import type { OutboxEntry } from '../core/outbox.ts';
import { LABEL_OUTBOX } from './outbox.ts';
import { fault } from '../../../common/messages.ts';

/** A peerops custom resource as the API server returns it. */
export interface Resource<S, T = unknown> extends KubernetesObject {
  metadata: V1ObjectMeta & { name: string; resourceVersion?: string };
  spec: S;
  status?: T;
}

export const FIELD_MANAGER = 'peerops-controller';
export const LABEL_ROUTER = 'peerops.dev/router';
export const LABEL_ASN = 'peerops.dev/asn';
export const LABEL_TOKEN = 'peerops.dev/agent-token';
export const LABEL_PORT_CLAIM = 'peerops.dev/port-claim';
export const LABEL_REVOCATIONS = 'peerops.dev/token-revocations';
/** The Secret that holds the revoked user and admin tokens (docs/login.md, Revoking tokens). */
export const REVOCATIONS = 'peerops-token-revocations';
const REVOCATIONS_KEY = 'revoked.json';
/** The ConfigMap that holds which router uses which nodeId and uuid (router-ids.ts). */
export const ROUTER_IDS = 'peerops-router-ids';
export const ANNOTATION_ACTOR = 'peerops.dev/last-actor';
export const ANNOTATION_MESSAGE = 'peerops.dev/last-change';
/** The first status of a session, on the objects created while status was a subresource of its own. */
export const ANNOTATION_INITIAL_STATUS = 'peerops.dev/initial-status';

export function httpCode(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/** The reason field of a Kubernetes Status body (AlreadyExists, Conflict, Invalid, ...). */
export function reason(err: unknown): string | undefined {
  if (!(err instanceof ApiException)) return undefined;
  const body: unknown = typeof err.body === 'string' ? safeJson(err.body) : err.body;
  return typeof body === 'object' && body !== null && 'reason' in body ? String(body.reason) : undefined;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export const isAlreadyExists = (err: unknown) => httpCode(err) === 409 && reason(err) === 'AlreadyExists';
export const isConflict = (err: unknown) => httpCode(err) === 409 && reason(err) !== 'AlreadyExists';
export const isNotFound = (err: unknown) => httpCode(err) === 404;

/** Anything the API server did not answer as expected becomes STORE_UNAVAILABLE or INVALID_REQUEST. */
export function storeError(err: unknown, what: string): Error {
  if (err instanceof DomainError) return err;
  const code = httpCode(err);
  if (code === 422 || code === 400) {
    return fault('store.kubernetesRefused', { what, reason: messageOf(err) });
  }
  return fault('store.kubernetesError', { what, reason: messageOf(err) });
}

function messageOf(err: unknown): string {
  if (err instanceof ApiException) {
    const body: unknown = typeof err.body === 'string' ? safeJson(err.body) : err.body;
    if (typeof body === 'object' && body !== null && 'message' in body) return String(body.message);
    return `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export class KubeApi {
  readonly namespace: string;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;

  constructor(kubeConfig: KubeConfig, namespace: string) {
    this.namespace = namespace;
    pooledConnections(kubeConfig);
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.core = kubeConfig.makeApiClient(CoreV1Api);
  }

  path(kind: Kind): string {
    return `/apis/${API_GROUP}/${API_VERSION}/namespaces/${this.namespace}/${KINDS[kind].plural}`;
  }

  private ref(kind: Kind) {
    return { group: API_GROUP, version: API_VERSION, namespace: this.namespace, plural: KINDS[kind].plural };
  }

  /**
   * Whether the API server serves `kind` with a status subresource (discovery, which every authenticated
   * client may read): a CRD older than the controller (docs/kubernetes.md, Install with Helm).
   */
  async hasStatusSubresource(kind: Kind): Promise<boolean> {
    const listed = await this.custom.getAPIResources({ group: API_GROUP, version: API_VERSION });
    return listed.resources.some((r) => r.name === `${KINDS[kind].plural}/status`);
  }

  /** Without a resourceVersion, so a consistent read (what etcd holds now), not a cache's view. */
  async list<S, T>(
    kind: Kind,
    labelSelector?: string,
  ): Promise<{ items: Resource<S, T>[]; metadata?: { resourceVersion?: string } }> {
    return (await this.custom.listNamespacedCustomObject({
      ...this.ref(kind),
      ...(labelSelector !== undefined ? { labelSelector } : {}),
    })) as {
      items: Resource<S, T>[];
      metadata?: { resourceVersion?: string };
    };
  }

  /** One page of a kind's list, for the informer (informers.ts): `limit` objects from `continueToken` on. */
  async listPage<S, T>(
    kind: Kind,
    limit: number,
    continueToken: string | undefined,
  ): Promise<{
    items: Resource<S, T>[];
    metadata?: { resourceVersion?: string; continue?: string };
  }> {
    return (await this.custom.listNamespacedCustomObject({
      ...this.ref(kind),
      limit,
      ...(continueToken !== undefined ? { _continue: continueToken } : {}),
    })) as { items: Resource<S, T>[]; metadata?: { resourceVersion?: string; continue?: string } };
  }

  async get<S, T>(kind: Kind, name: string): Promise<Resource<S, T> | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({ ...this.ref(kind), name })) as Resource<S, T>;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async create<S, T>(kind: Kind, body: Resource<S, T>): Promise<Resource<S, T>> {
    return (await this.custom.createNamespacedCustomObject({
      ...this.ref(kind),
      body,
      fieldManager: FIELD_MANAGER,
    })) as Resource<S, T>;
  }

  /** Replace with the resourceVersion in body.metadata: 409 Conflict when someone else wrote first. */
  async replace<S, T>(kind: Kind, body: Resource<S, T>): Promise<Resource<S, T>> {
    return (await this.custom.replaceNamespacedCustomObject({
      ...this.ref(kind),
      name: body.metadata.name,
      body,
      fieldManager: FIELD_MANAGER,
    })) as Resource<S, T>;
  }

  /**
   * JSON merge patch of the status; with `resourceVersion`, only if the object is still at it (409
   * otherwise): a router's observations are written over what the writer last read, never over a newer
   * one another replica wrote meanwhile (docs/kubernetes.md, Observations).
   */
  async patchStatus<S, T>(
    kind: Kind,
    name: string,
    status: unknown,
    resourceVersion?: string,
  ): Promise<Resource<S, T>> {
    const body = resourceVersion === undefined ? { status } : { metadata: { resourceVersion }, status };
    return (await this.custom.patchNamespacedCustomObjectStatus(
      { ...this.ref(kind), name, body, fieldManager: FIELD_MANAGER },
      MERGE_PATCH,
    )) as Resource<S, T>;
  }

  /** Delete, only if the object is still at resourceVersion (when given). */
  async delete(kind: Kind, name: string, resourceVersion?: string): Promise<void> {
    await this.custom.deleteNamespacedCustomObject({
      ...this.ref(kind),
      name,
      body: resourceVersion ? { preconditions: { resourceVersion } } : {},
    });
  }

  /** A core/v1 Event on a peerops object: the audit trail of who changed what (`kubectl get events`). */
  async recordEvent(
    object: Resource<unknown, unknown>,
    reason: string,
    actor: string,
    message: string,
  ): Promise<void> {
    const now = new Date();
    await this.core.createNamespacedEvent({
      namespace: this.namespace,
      body: {
        metadata: { generateName: `${object.metadata.name}.` },
        involvedObject: {
          apiVersion: object.apiVersion ?? GROUP_VERSION,
          kind: object.kind ?? '',
          name: object.metadata.name,
          namespace: this.namespace,
          ...(object.metadata.uid ? { uid: object.metadata.uid } : {}),
        },
        reason,
        message: `${actor}: ${message}`.slice(0, 1024),
        type: 'Normal',
        source: { component: FIELD_MANAGER },
        reportingComponent: FIELD_MANAGER,
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    });
  }

  // ---- port claims: one ConfigMap per (router, port), named deterministically ----

  static claimName(router: string, port: number): string {
    return `peerops-port-${router}-${port}`;
  }

  async createClaim(router: string, port: number, session: string): Promise<V1ConfigMap> {
    return this.core.createNamespacedConfigMap({
      namespace: this.namespace,
      fieldManager: FIELD_MANAGER,
      body: {
        metadata: {
          name: KubeApi.claimName(router, port),
          labels: { [LABEL_PORT_CLAIM]: router, 'app.kubernetes.io/managed-by': 'peerops' },
        },
        data: { session, router, port: String(port), claimedAt: new Date().toISOString() },
      },
    });
  }

  async readClaim(router: string, port: number): Promise<V1ConfigMap | undefined> {
    try {
      return await this.core.readNamespacedConfigMap({
        namespace: this.namespace,
        name: KubeApi.claimName(router, port),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async replaceClaim(claim: V1ConfigMap, session: string): Promise<void> {
    await this.core.replaceNamespacedConfigMap({
      namespace: this.namespace,
      name: claim.metadata?.name ?? '',
      fieldManager: FIELD_MANAGER,
      body: { ...claim, data: { ...claim.data, session, claimedAt: new Date().toISOString() } },
    });
  }

  /** Remove the claim of a port if `session` still holds it. */
  async releaseClaim(router: string, port: number, session: string): Promise<void> {
    const claim = await this.readClaim(router, port);
    if (claim?.data?.['session'] !== session) return;
    try {
      await this.core.deleteNamespacedConfigMap({
        namespace: this.namespace,
        name: KubeApi.claimName(router, port),
        body: { preconditions: { resourceVersion: claim.metadata?.resourceVersion ?? '' } },
      });
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err)) throw err;
    }
  }

  // ---- outbox records: events with no session object to ride on (outbox.ts) ----

  /** A record of `entries`; a deletion's names the session (uid) and the resourceVersion its delete is sent at. */
  createOutboxRecord(
    entries: readonly OutboxEntry[],
    session?: { name: string; uid: string; resourceVersion: string },
  ): Promise<V1ConfigMap> {
    return this.core.createNamespacedConfigMap({
      namespace: this.namespace,
      fieldManager: FIELD_MANAGER,
      body: {
        metadata: {
          generateName: 'peerops-outbox-',
          labels: {
            [LABEL_OUTBOX]: session ? 'deletion' : 'events',
            'app.kubernetes.io/managed-by': 'peerops',
          },
        },
        data: {
          entries: JSON.stringify(entries),
          ...(session
            ? {
                session: session.name,
                sessionUid: session.uid,
                sessionResourceVersion: session.resourceVersion,
              }
            : {}),
        },
      },
    });
  }

  /** The record with only `entries`, at the resourceVersion read: 409 when it changed meanwhile. */
  replaceOutboxRecord(record: V1ConfigMap, entries: readonly OutboxEntry[]): Promise<V1ConfigMap> {
    return this.core.replaceNamespacedConfigMap({
      namespace: this.namespace,
      name: record.metadata?.name ?? '',
      fieldManager: FIELD_MANAGER,
      body: { ...record, data: { ...record.data, entries: JSON.stringify(entries) } },
    });
  }

  async readOutboxRecord(name: string): Promise<V1ConfigMap | undefined> {
    try {
      return await this.core.readNamespacedConfigMap({ namespace: this.namespace, name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Deletes a record, only if still at `resourceVersion` when given; one already gone is fine. */
  async deleteOutboxRecord(name: string, resourceVersion?: string): Promise<void> {
    try {
      await this.core.deleteNamespacedConfigMap({
        namespace: this.namespace,
        name,
        body: resourceVersion ? { preconditions: { resourceVersion } } : {},
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  configMapsPath(): string {
    return `/api/v1/namespaces/${this.namespace}/configmaps`;
  }

  /** One page of the outbox records, for the informer (informers.ts). */
  listOutboxRecords(limit: number, continueToken: string | undefined) {
    return this.core.listNamespacedConfigMap({
      namespace: this.namespace,
      labelSelector: LABEL_OUTBOX,
      limit,
      ...(continueToken !== undefined ? { _continue: continueToken } : {}),
    });
  }

  // ---- router identities: one ConfigMap mapping every nodeId and uuid to its router ----

  async readRouterIds(): Promise<V1ConfigMap | undefined> {
    try {
      return await this.core.readNamespacedConfigMap({ namespace: this.namespace, name: ROUTER_IDS });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Create, or replace with the resourceVersion read: 409 when another replica wrote in between. */
  async writeRouterIds(current: V1ConfigMap | undefined, data: Record<string, string>): Promise<void> {
    if (!current) {
      await this.core.createNamespacedConfigMap({
        namespace: this.namespace,
        fieldManager: FIELD_MANAGER,
        body: {
          metadata: { name: ROUTER_IDS, labels: { 'app.kubernetes.io/managed-by': 'peerops' } },
          data,
        },
      });
      return;
    }
    await this.core.replaceNamespacedConfigMap({
      namespace: this.namespace,
      name: ROUTER_IDS,
      fieldManager: FIELD_MANAGER,
      body: { ...current, data },
    });
  }

  // ---- agent tokens: one Secret per router holding the sha256 of the token ----

  static tokenSecretName(router: string): string {
    return `peerops-agent-token-${router}`;
  }

  async putTokenHash(router: string, sha256: string): Promise<V1Secret> {
    const body: V1Secret = {
      metadata: {
        name: KubeApi.tokenSecretName(router),
        labels: { [LABEL_TOKEN]: router, 'app.kubernetes.io/managed-by': 'peerops' },
      },
      type: 'Opaque',
      data: { sha256: Buffer.from(sha256).toString('base64') },
    };
    try {
      return await this.core.createNamespacedSecret({
        namespace: this.namespace,
        body,
        fieldManager: FIELD_MANAGER,
      });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      return this.core.replaceNamespacedSecret({
        namespace: this.namespace,
        name: KubeApi.tokenSecretName(router),
        body,
        fieldManager: FIELD_MANAGER,
      });
    }
  }

  async deleteTokenHash(router: string): Promise<void> {
    try {
      await this.core.deleteNamespacedSecret({
        namespace: this.namespace,
        name: KubeApi.tokenSecretName(router),
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  // ---- token revocations: one Secret, replaced at the resourceVersion read ----

  async getRevocations(): Promise<V1Secret | undefined> {
    try {
      return await this.core.readNamespacedSecret({ namespace: this.namespace, name: REVOCATIONS });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Stores `list` (JSON) with the audit annotations of the change: creates the Secret when there was none
   * (`current` undefined), else replaces `current` at its resourceVersion. AlreadyExists or Conflict when another replica wrote first.
   */
  putRevocations(
    list: string,
    current: V1Secret | undefined,
    annotations: Record<string, string>,
  ): Promise<V1Secret> {
    const body: V1Secret = {
      metadata: {
        name: REVOCATIONS,
        annotations,
        labels: { [LABEL_REVOCATIONS]: 'true', 'app.kubernetes.io/managed-by': 'peerops' },
        ...(current?.metadata?.resourceVersion ? { resourceVersion: current.metadata.resourceVersion } : {}),
      },
      type: 'Opaque',
      data: { [REVOCATIONS_KEY]: Buffer.from(list).toString('base64') },
    };
    return current === undefined
      ? this.core.createNamespacedSecret({ namespace: this.namespace, body, fieldManager: FIELD_MANAGER })
      : this.core.replaceNamespacedSecret({
          namespace: this.namespace,
          name: REVOCATIONS,
          body,
          fieldManager: FIELD_MANAGER,
        });
  }

  /** The revocations Secret as a list of one, for its informer (informers.ts). */
  listRevocationSecrets(limit: number, continueToken: string | undefined) {
    return this.core.listNamespacedSecret({
      namespace: this.namespace,
      labelSelector: LABEL_REVOCATIONS,
      limit,
      ...(continueToken !== undefined ? { _continue: continueToken } : {}),
    });
  }

  tokenSecretsPath(): string {
    return `/api/v1/namespaces/${this.namespace}/secrets`;
  }

  /** One page of the agent-token Secrets, for the informer (informers.ts). */
  listTokenSecrets(limit: number, continueToken: string | undefined) {
    return this.core.listNamespacedSecret({
      namespace: this.namespace,
      labelSelector: LABEL_TOKEN,
      limit,
      ...(continueToken !== undefined ? { _continue: continueToken } : {}),
    });
  }
}

export function tokenHashOf(secret: V1Secret): string | undefined {
  const data = secret.data?.['sha256'];
  return data ? Buffer.from(data, 'base64').toString('utf8') : undefined;
}

/** The revocation list a revocations Secret holds, parsed (undefined when it holds none or no JSON). */
export function revocationsOf(secret: V1Secret | undefined): unknown {
  const data = secret?.data?.[REVOCATIONS_KEY];
  return data === undefined ? undefined : safeJson(Buffer.from(data, 'base64').toString('utf8'));
}
