/**
 * Opens the configured store back end: git (the embedded default, `<data>/store.git`) or Kubernetes
 * (PEEROPS_STORE=kubernetes; its module belongs to the Kubernetes back end). Both time their writes in
 * the shared core (core/store-core.ts): peerops_store_operation_duration_seconds.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Store } from './store.ts';

export async function openStore(
  config: Pick<Config, 'store' | 'dataDir'> & Partial<Pick<Config, 'git'>>,
  logger?: Logger,
  /** `peerops serve`: the git store installs the pre-receive hook of this process (GitStoreOptions). */
  serving = false,
): Promise<Store> {
  if (config.store === 'kubernetes') {
    // Loaded only for this back end (its client library is large); a literal path, so the release
    // bundle carries it as a chunk of its own.
    const { createKubernetesStore } = await import('./kubernetes/index.ts');
    return createKubernetesStore(logger ? { logger } : {});
  }
  const { createGitStore } = await import('./git/index.ts');
  const git = config.git;
  return createGitStore({
    dir: join(config.dataDir, 'store.git'),
    ...(git ? { branch: git.branch } : {}),
    ...(git?.remote ? { remote: { ...git.remote, branch: git.branch } } : {}),
    ...(logger ? { logger } : {}),
    preReceiveHook: serving,
  });
}
