/**
 * Opens the configured store back end: git (the embedded default, `<data>/store.git`) or Kubernetes
 * (PEEROPS_STORE=kubernetes; its module belongs to the Kubernetes back end). Every store comes back
 * instrumented: write latency lands in peerops_store_operation_duration_seconds.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { storeLatency } from '../metrics.ts';
import type { Store } from './store.ts';

const WRITES = new Set<string>([
  'createRouter',
  'updateRouter',
  'deleteRouter',
  'setAgentTokenHash',
  'createSession',
  'updateSession',
  'putPolicy',
  'deletePolicy',
]);

/** The same store, with each write timed. */
export function instrumentStore(store: Store): Store {
  // One wrapper per method, made on first use: reads sit on every request's path.
  const methods = new Map<PropertyKey, unknown>();
  return new Proxy(store, {
    get(target, prop, receiver) {
      const cached = methods.get(prop);
      if (cached) return cached;
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const wrapped = wrap(target, prop, value as (...args: unknown[]) => unknown);
      methods.set(prop, wrapped);
      return wrapped;
    },
  });
}

function wrap(target: Store, prop: PropertyKey, fn: (...args: unknown[]) => unknown) {
  if (typeof prop !== 'string' || !WRITES.has(prop)) return fn.bind(target);
  return async (...args: unknown[]) => {
    const end = storeLatency.startTimer({ operation: prop });
    try {
      const result = await fn.apply(target, args);
      end({ outcome: 'ok' });
      return result;
    } catch (err) {
      end({ outcome: 'error' });
      throw err;
    }
  };
}

export async function openStore(config: Pick<Config, 'store' | 'dataDir'>, logger?: Logger): Promise<Store> {
  if (config.store === 'kubernetes') {
    // Branch point for the Kubernetes back end: its module exports createKubernetesStore(options).
    const modulePath = './kubernetes/index.ts';
    const mod = (await import(modulePath)) as {
      createKubernetesStore(options: { logger?: Logger }): Store;
    };
    return instrumentStore(mod.createKubernetesStore(logger ? { logger } : {}));
  }
  const { createGitStore } = await import('./git/index.ts');
  return instrumentStore(
    createGitStore({ dir: join(config.dataDir, 'store.git'), ...(logger ? { logger } : {}) }),
  );
}
