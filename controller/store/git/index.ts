/** The git store: the embedded default back end. */
import { GitStore, type GitStoreOptions } from './git-store.ts';

export { GitStore, STATUS_REF, type GitStoreOptions } from './git-store.ts';

export function createGitStore(options: GitStoreOptions): GitStore {
  return new GitStore(options);
}
