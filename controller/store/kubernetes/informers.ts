/**
 * Starting the informers (list + watch) the Kubernetes store's index is fed by: a first list that fails
 * is an error of start(), transient answers of an API server still starting are retried.
 */
import type { Informer, KubernetesObject } from '@kubernetes/client-node';
import { httpCode } from './api.ts';

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
  let failure: unknown;
  const capture = (err: unknown) => {
    failure ??= err ?? new Error('watch failed');
  };
  informer.on('error', capture);
  try {
    await informer.start();
  } finally {
    informer.off('error', capture);
  }
  if (failure !== undefined) {
    await informer.stop().catch(() => undefined);
    throw failure;
  }
}
