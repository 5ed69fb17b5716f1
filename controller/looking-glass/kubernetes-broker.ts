/**
 * Looking-glass queries shared by the replicas of the Kubernetes store (docs/decisions.md, Looking glass
 * across replicas): each query is a ConfigMap in the store's namespace, so the replica a caller reaches,
 * the one holding the agent's poll and the one the agent posts its answer to may all differ. The asking
 * replica creates the query; the replica whose agent poll sees it (every replica watches them) claims it
 * with a write at the resourceVersion it read, so exactly one agent poll gets it; the agent's answer is
 * written onto the same object; the asker sees it through its watch, answers its caller and deletes it.
 * A query whose asker died is deleted by any replica once it is well past its time.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import {
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1ConfigMap,
} from '@kubernetes/client-node';
import type pino from 'pino';
import { LG_OUTPUT_LIMIT_BYTES, LgAnswer, LgQuery } from '../../common/looking-glass.ts';
import { validate } from '../../common/validate.ts';
import { isConflict, isNotFound, storeError } from '../store/kubernetes/api.ts';
import { pooledConnections } from '../store/kubernetes/connections.ts';
import { defaultKubeConfig, defaultNamespace } from '../store/kubernetes/index.ts';
import { makePagedInformer, startInformer } from '../store/kubernetes/informers.ts';
import {
  LG_ANSWER_WAIT_MS,
  LG_PENDING_PER_ROUTER,
  notAnswered,
  stopped,
  tooManyQueries,
  type LookingGlassBroker,
} from './broker.ts';

/** The label every query carries; its value is the router's name. */
export const LABEL_LG_ROUTER = 'peerops.dev/lg-router';
/** When the query's asker stops waiting (epoch ms): past it and a grace, any replica deletes it. */
const ANNOTATION_EXPIRES = 'peerops.dev/lg-expires';
const NAME_PREFIX = 'peerops-lg-';
/** How long a query outlives its asker's wait before a sweep deletes it, and how often replicas sweep. */
const SWEEP_GRACE_MS = 30_000;
/**
 * The most an answer written onto a ConfigMap may take: the API server refuses objects above 1 MiB, and
 * LG_OUTPUT_LIMIT_BYTES of output can grow under JSON escaping. A longer answer is cut and marked truncated.
 */
const ANSWER_LIMIT_BYTES = 900 * 1024;
const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface Asked {
  router: string;
  resolve(answer: LgAnswer): void;
  reject(err: Error): void;
}

export interface KubernetesBrokerOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** This replica's name (POD_NAME), written on the queries it claims for its agent polls. */
  identity: string;
  logger?: pino.Logger;
}

export class KubernetesLookingGlassBroker implements LookingGlassBroker {
  private readonly core: CoreV1Api;
  private readonly namespace: string;
  private readonly identity: string;
  private readonly log: pino.Logger | undefined;
  private readonly informer;
  /** This replica's callers waiting, by query name. */
  private readonly asked = new Map<string, Asked>();
  /** Agent polls on this replica waiting for a query, by router. */
  private readonly waiters = new Map<string, Set<() => void>>();
  private sweeper: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(options: KubernetesBrokerOptions) {
    this.namespace = options.namespace;
    this.identity = options.identity;
    this.log = options.logger;
    pooledConnections(options.kubeConfig);
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.informer = makePagedInformer<V1ConfigMap>(
      options.kubeConfig,
      `/api/v1/namespaces/${this.namespace}/configmaps`,
      (limit, next) =>
        this.core.listNamespacedConfigMap({
          namespace: this.namespace,
          labelSelector: LABEL_LG_ROUTER,
          limit,
          ...(next ? { _continue: next } : {}),
        }),
      { labelSelector: LABEL_LG_ROUTER },
    );
    this.informer.on('add', (cm) => this.seen(cm));
    this.informer.on('update', (cm) => this.seen(cm));
    this.informer.on('error', (err: unknown) => {
      if (this.closed) return;
      // the watch ended with an error: list and watch again after a pause (as the store's informers do)
      this.log?.warn({ err }, 'looking-glass watch failed; restarting in 2 s');
      setTimeout(() => {
        if (!this.closed)
          this.informer
            .start()
            .catch((e: unknown) => this.log?.warn({ err: e }, 'looking-glass watch restart failed'));
      }, 2000).unref();
    });
  }

  /** Lists and watches the queries; rejects when the API server refuses (no Role for ConfigMaps). */
  async start(): Promise<void> {
    await startInformer(this.informer);
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_GRACE_MS).unref();
  }

  async ask(router: string, query: Omit<LgQuery, 'id'>, waitMs = LG_ANSWER_WAIT_MS): Promise<LgAnswer> {
    if (this.closed) throw stopped(router);
    if (this.open(router, () => true).length >= LG_PENDING_PER_ROUTER) throw tooManyQueries(router);
    const id = randomBytes(12).toString('hex');
    const name = NAME_PREFIX + id;
    const answered = new Promise<LgAnswer>((resolve, reject) =>
      this.asked.set(name, { router, resolve, reject }),
    );
    let timer: NodeJS.Timeout | undefined;
    try {
      await this.core.createNamespacedConfigMap({
        namespace: this.namespace,
        body: {
          metadata: {
            name,
            labels: { [LABEL_LG_ROUTER]: router },
            annotations: { [ANNOTATION_EXPIRES]: String(Date.now() + waitMs) },
          },
          data: { query: JSON.stringify({ id, ...query } satisfies LgQuery) },
        },
      });
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(notAnswered(router, waitMs, this.takenNow(name))), waitMs);
      });
      return await Promise.race([answered, late]);
    } catch (err) {
      // the refusals above pass as they are (storeError keeps domain errors)
      throw storeError(err, `looking-glass query for router ${router}`);
    } finally {
      clearTimeout(timer);
      this.asked.delete(name);
      void this.remove(name);
    }
  }

  async take(router: string, waitMs: number, signal: AbortSignal): Promise<LgQuery[]> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const untaken = this.open(router, (cm) => cm.data?.['taken'] === undefined);
      if (untaken.length > 0) {
        const claimed = (await Promise.all(untaken.map((cm) => this.claim(cm)))).filter(
          (q): q is LgQuery => q !== undefined,
        );
        // none claimed: another poll of the same agent took them first; wait for the next
        if (claimed.length > 0) return claimed;
      }
      const left = deadline - Date.now();
      if (left <= 0 || signal.aborted || this.closed) return [];
      await this.nextQuery(router, left, signal);
    }
  }

  async answer(router: string, id: string, answer: LgAnswer): Promise<boolean> {
    const name = NAME_PREFIX + id;
    const cm = this.informer.get(name, this.namespace);
    if (cm && cm.metadata?.labels?.[LABEL_LG_ROUTER] !== router) return false;
    try {
      await this.core.patchNamespacedConfigMap(
        { name, namespace: this.namespace, body: { data: { answer: JSON.stringify(fitted(answer)) } } },
        MERGE_PATCH,
      );
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw storeError(err, `looking-glass answer ${id}`);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const asked of this.asked.values()) asked.reject(stopped(asked.router));
    for (const set of this.waiters.values()) for (const wake of set) wake();
    await this.informer.stop().catch(() => undefined);
  }

  /** The router's queries not answered yet and not past their time, that `pick` keeps. */
  private open(router: string, pick: (cm: V1ConfigMap) => boolean): V1ConfigMap[] {
    const now = Date.now();
    return this.informer
      .list(this.namespace)
      .filter(
        (cm) =>
          cm.metadata?.labels?.[LABEL_LG_ROUTER] === router &&
          cm.data?.['answer'] === undefined &&
          Number(cm.metadata.annotations?.[ANNOTATION_EXPIRES] ?? 0) > now &&
          pick(cm),
      );
  }

  private takenNow(name: string): boolean {
    return this.informer.get(name, this.namespace)?.data?.['taken'] !== undefined;
  }

  /** Marks the query taken by this replica, at the version read: undefined when another took it first. */
  private async claim(cm: V1ConfigMap): Promise<LgQuery | undefined> {
    const v = validate<LgQuery>(LgQuery, parsed(cm.data?.['query']));
    if (!v.ok) return undefined;
    try {
      await this.core.replaceNamespacedConfigMap({
        name: cm.metadata!.name!,
        namespace: this.namespace,
        body: { ...cm, data: { ...cm.data, taken: this.identity } },
      });
      return v.value;
    } catch (err) {
      if (isConflict(err) || isNotFound(err)) return undefined;
      throw storeError(err, `looking-glass query ${cm.metadata?.name}`);
    }
  }

  /** Resolves when a query for `router` arrives, after `ms`, or when `signal` aborts. */
  private nextQuery(router: string, ms: number, signal: AbortSignal): Promise<void> {
    let set = this.waiters.get(router);
    if (!set) this.waiters.set(router, (set = new Set()));
    const waiting = set;
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        waiting.delete(done);
        if (waiting.size === 0 && this.waiters.get(router) === waiting) this.waiters.delete(router);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      waiting.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** A query added or changed, on any replica: its answer for a caller here, or work for a poll here. */
  private seen(cm: V1ConfigMap): void {
    const name = cm.metadata?.name ?? '';
    const answer = cm.data?.['answer'];
    if (answer !== undefined) {
      const asked = this.asked.get(name);
      if (!asked) return;
      const v = validate<LgAnswer>(LgAnswer, parsed(answer));
      if (v.ok) asked.resolve(v.value);
      else asked.reject(new Error(`looking-glass answer ${name} does not match its schema`));
      return;
    }
    if (cm.data?.['taken'] !== undefined) return;
    const router = cm.metadata?.labels?.[LABEL_LG_ROUTER] ?? '';
    for (const wake of this.waiters.get(router) ?? []) wake();
  }

  private async remove(name: string): Promise<void> {
    await this.core.deleteNamespacedConfigMap({ name, namespace: this.namespace }).catch((err: unknown) => {
      if (!isNotFound(err)) this.log?.warn({ err, name }, 'looking-glass query not deleted; a sweep will');
    });
  }

  /** Deletes the queries whose askers stopped waiting long ago (the replica died before deleting them). */
  private async sweep(): Promise<void> {
    const old = Date.now() - SWEEP_GRACE_MS;
    for (const cm of this.informer.list(this.namespace))
      if (Number(cm.metadata?.annotations?.[ANNOTATION_EXPIRES] ?? 0) < old)
        await this.remove(cm.metadata!.name!);
  }
}

function parsed(text: string | undefined): unknown {
  try {
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The answer as it fits in a ConfigMap: output cut (and marked truncated) when its JSON is too long. */
function fitted(answer: LgAnswer): LgAnswer {
  let output = answer.output;
  if (Buffer.byteLength(JSON.stringify(output)) <= ANSWER_LIMIT_BYTES) return answer;
  // escaping grows a character to at most six bytes: this many always fit
  output = output.slice(0, Math.min(LG_OUTPUT_LIMIT_BYTES, Math.floor(ANSWER_LIMIT_BYTES / 6)));
  // no half of a surrogate pair at the cut
  if (/[\uD800-\uDBFF]$/.test(output)) output = output.slice(0, -1);
  return { ...answer, output, truncated: true };
}

/** The broker of a replica in a pod: the store's KubeConfig and namespace, named POD_NAME; started. */
export async function startKubernetesBroker(logger?: pino.Logger): Promise<KubernetesLookingGlassBroker> {
  const broker = new KubernetesLookingGlassBroker({
    kubeConfig: defaultKubeConfig(),
    namespace: defaultNamespace(),
    identity: process.env['POD_NAME'] || hostname(),
    ...(logger ? { logger } : {}),
  });
  await broker.start();
  return broker;
}
