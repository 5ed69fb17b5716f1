/**
 * The informers (list + watch) the Kubernetes store's index is fed by: a first list that fails is an
 * error of start(), transient answers of an API server still starting are retried.
 *
 * The library's informer (makeInformer) lists a kind in one answer and keeps every object as the API
 * server sent it; it has no option for either. This one is its ListWatch with:
 * - the list read in pages of LIST_PAGE objects (`limit` and `continue`), so that 10,000 sessions are
 *   never one answer of tens of MiB held as text and parsed at once;
 * - `metadata.managedFields` dropped from every object, listed or watched, before the cache or the
 *   store sees it: the API server's record of which field manager set which field, a third of a session
 *   as the API server sends it and half of what the informer held of it (docs/benchmarks.md), which
 *   nothing in peerops reads. A write sends the object without it, and the API server keeps what it had
 *   (a write changes managedFields only when it names them; test/k8s/informers.test.ts);
 * - watch bookmarks asked for (`allowWatchBookmarks`, as client-go's informers do): a watch that the
 *   client restarts (no event for 30 s) goes on from a recent resourceVersion instead of one the API
 *   server may have compacted away, which would cost a full list again.
 */
import {
  ListWatch,
  Watch,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type ObjectCache,
} from '@kubernetes/client-node';
import { httpCode } from './api.ts';

/** Objects per list page: the API server's own pagers (kubectl, client-go) use 500. */
export const LIST_PAGE = 500;

/** One page of a list: `continue` (raw JSON) or `_continue` (the library's typed lists) names the next. */
export interface ListPage<T> {
  items: T[];
  metadata?: { resourceVersion?: string; continue?: string; _continue?: string };
}

/** The object without what the store never reads (managedFields); changed in place and returned. */
function trimmed<T extends KubernetesObject>(obj: T): T {
  if (obj.metadata?.managedFields) delete obj.metadata.managedFields;
  return obj;
}

/**
 * Every page of a list, trimmed, as one list at the resourceVersion the pages were read at. A continue
 * token the API server no longer honours (410 Expired: the list took longer than etcd keeps a revision)
 * starts the list over.
 */
export async function listAllPages<T extends KubernetesObject>(
  page: (limit: number, continueToken: string | undefined) => Promise<ListPage<T>>,
  pageSize = LIST_PAGE,
): Promise<KubernetesListObject<T>> {
  for (let attempt = 1; ; attempt++) {
    const items: T[] = [];
    let resourceVersion: string | undefined;
    let next: string | undefined;
    try {
      do {
        const answer = await page(pageSize, next);
        for (const item of answer.items) items.push(trimmed(item));
        resourceVersion = answer.metadata?.resourceVersion;
        next = answer.metadata?.continue || answer.metadata?._continue || undefined;
      } while (next);
    } catch (err) {
      if (next !== undefined && httpCode(err) === 410 && attempt < 3) continue;
      throw err;
    }
    return { items, metadata: resourceVersion !== undefined ? { resourceVersion } : {} };
  }
}

/** The library's Watch with bookmarks asked for and every object trimmed before the informer sees it. */
class TrimmedWatch extends Watch {
  override watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: KubernetesObject, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(
      path,
      { ...queryParams, allowWatchBookmarks: true },
      (phase, obj: KubernetesObject, raw) => callback(phase, trimmed(obj), raw),
      done,
    );
  }
}

/** An informer on `path` listing with `page` (see listAllPages), started by startInformer. */
export function makePagedInformer<T extends KubernetesObject>(
  kubeConfig: KubeConfig,
  path: string,
  page: (limit: number, continueToken: string | undefined) => Promise<ListPage<T>>,
  options: { labelSelector?: string; pageSize?: number } = {},
): Informer<T> & ObjectCache<T> {
  return new ListWatch<T>(
    path,
    new TrimmedWatch(kubeConfig),
    () => listAllPages(page, options.pageSize),
    false,
    options.labelSelector,
  );
}

/** Starts an informer; its first list failing (forbidden, unreachable) rejects instead of only calling the error handlers. */
export async function startInformer<T extends KubernetesObject>(informer: Informer<T>): Promise<void> {
  // the API server answers 429/5xx for a while after a CRD appears or while its watch cache fills: retry
  // those for up to 30 s; refusals (401, 403, 404) fail at once
  const deadline = Date.now() + 30_000;
  for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
    try {
      await startInformerOnce(informer);
      return;
    } catch (err) {
      const code = httpCode(err);
      const transient = code === undefined || code === 429 || code >= 500;
      if (!transient || Date.now() + delay > deadline) throw err;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

async function startInformerOnce<T extends KubernetesObject>(informer: Informer<T>): Promise<void> {
  // the first error, kept as the informer gave it: the retry reads its HTTP code (httpCode)
  let failure: unknown;
  let failed = false;
  const capture = (err: unknown) => {
    if (!failed) failure = err ?? new Error('watch failed');
    failed = true;
  };
  informer.on('error', capture);
  try {
    await informer.start();
  } finally {
    informer.off('error', capture);
  }
  if (failed) {
    await informer.stop().catch(() => undefined);
    throw failure;
  }
}
