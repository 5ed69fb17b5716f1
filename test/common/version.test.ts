/**
 * The code's revision (common/version.ts), which keys the store's parse cache (docs/store.md): a
 * release's define wins, a checkout says its commit and a hash of its local changes, real git.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const REPO = new URL('../..', import.meta.url).pathname;

/** codeRevision() as a fresh process sees it (the value is computed once per process). */
async function revisionIn(env: NodeJS.ProcessEnv): Promise<string> {
  const script =
    "import('./common/version.ts').then((m) => console.log(JSON.stringify(m.codeRevision() ?? null)))";
  const { stdout } = await run(process.execPath, ['-e', script], {
    cwd: REPO,
    env: { ...process.env, ...env },
  });
  return JSON.parse(stdout) as string;
}

describe('codeRevision', () => {
  it("is the checkout's commit, with a hash of its local changes when it has some", async () => {
    const head = (await run('git', ['-C', REPO, 'rev-parse', 'HEAD'])).stdout.trim();
    const dirty = (await run('git', ['-C', REPO, 'diff', 'HEAD', '--stat'])).stdout.trim() !== '';
    const env = { PEEROPS_BUILD_REVISION: undefined };
    const revision = await revisionIn(env);
    if (dirty) expect(revision).toMatch(new RegExp(`^${head}-dirty-[0-9a-f]{16}$`));
    else expect(revision).toBe(head);
    expect(await revisionIn(env)).toBe(revision);
  });

  it("is the release's when the bundle defines one, and unknown when it defines none", async () => {
    expect(await revisionIn({ PEEROPS_BUILD_REVISION: 'abc123' })).toBe('abc123');
    expect(await revisionIn({ PEEROPS_BUILD_REVISION: '' })).toBeNull();
  });
});
