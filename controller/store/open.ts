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

const WRITES = [
  'createRouter',
  'updateRouter',
  'deleteRouter',
  'setAgentTokenHash',
  'createSession',
  'updateSession',
  'putPolicy',
  'deletePolicy',
] as const satisfies (keyof Store)[];

type Write = (...args: unknown[]) => Promise<unknown>;

/**
 * The same store, with each write timed: the write methods are replaced on the instance itself and the
 * reads are left alone. (A Proxy did this before; its trap ran on every method access, and reads sit on
 * every request's path.)
 */
export function instrumentStore<S extends Store>(store: S): S {
  const methods = store as unknown as Record<(typeof WRITES)[number], Write>;
  for (const operation of WRITES) {
    const write = methods[operation].bind(store);
    methods[operation] = async (...args) => {
      const end = storeLatency.startTimer({ operation });
      try {
        const result = await write(...args);
        end({ outcome: 'ok' });
        return result;
      } catch (err) {
        end({ outcome: 'error' });
        throw err;
      }
    };
  }
  return store;
}

export async function openStore(
  config: Pick<Config, 'store' | 'dataDir'> & Partial<Pick<Config, 'git'>>,
  logger?: Logger,
): Promise<Store> {
  if (config.store === 'kubernetes') {
    // Loaded only for this back end (its client library is large); a literal path, so the release
    // bundle carries it as a chunk of its own.
    const { createKubernetesStore } = await import('./kubernetes/index.ts');
    return instrumentStore(createKubernetesStore(logger ? { logger } : {}));
  }
  const { createGitStore } = await import('./git/index.ts');
  const git = config.git;
  return instrumentStore(
    createGitStore({
      dir: join(config.dataDir, 'store.git'),
      ...(git ? { branch: git.branch } : {}),
      ...(git?.remote ? { remote: { ...git.remote, branch: git.branch } } : {}),
      ...(logger ? { logger } : {}),
    }),
  );
}
