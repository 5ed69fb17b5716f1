/** The git store: the embedded default back end, held by the store core. */
import { StoreCore } from '../core/store-core.ts';
import { GitBackend, type GitStoreOptions } from './git-store.ts';

export { GitBackend, STATUS_REF, type GitStoreOptions } from './git-store.ts';

/** The store over a git repository; its back end's own extras (housekeeping, …) are `storage`'s. */
export type GitStore = StoreCore<GitBackend>;

export function createGitStore(options: GitStoreOptions): GitStore {
  return new StoreCore((state) => new GitBackend(options, state));
}
