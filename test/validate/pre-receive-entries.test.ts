/**
 * The pre-receive hook judges every entry under the store's folders (docs/gitops.md, "Checked pushes"):
 * a submodule, a symbolic link, a file outside the layout and a manifest over the size
 * bound are refused with their paths, and the alias bomb with its line, in a real bare repository.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MANIFEST_LIMITS } from '../../common/manifests.ts';
import { installPreReceiveHook } from '../../controller/store/git/pre-receive.ts';
import { aliasBomb, sessionYaml } from './hostile-manifests.ts';

const exec = promisify(execFile);
const entry = join(import.meta.dirname, '../../bin/peerops.ts');

let dir: string;
let bare: string;
let work: string;

async function git(cwd: string, ...args: string[]): Promise<string> {
  return (await exec('git', args, { cwd, maxBuffer: 64 * 1024 * 1024 })).stdout.trim();
}

async function commit(message: string, add = true): Promise<void> {
  if (add) await git(work, 'add', '-A');
  await git(work, '-c', 'user.name=Test', '-c', 'user.email=test@example.net', 'commit', '-q', '-m', message);
}

/** A file of the work tree, its directory made. */
async function put(path: string, text: string): Promise<void> {
  await mkdir(dirname(join(work, path)), { recursive: true });
  await writeFile(join(work, path), text);
}

/**
 * Commits what `change` did (staged by `git add -A`, unless it staged itself), pushes it to main, then
 * drops the commit: whether the push went in, and its stderr.
 */
async function pushed(change: () => Promise<void>, add = true): Promise<{ ok: boolean; stderr: string }> {
  await change();
  await commit('change', add);
  try {
    const { stderr } = await exec('git', ['push', bare, 'HEAD:refs/heads/main'], { cwd: work });
    return { ok: true, stderr };
  } catch (err) {
    return { ok: false, stderr: (err as { stderr: string }).stderr };
  } finally {
    await git(work, 'reset', '-q', '--hard', 'HEAD~1');
    await git(work, 'clean', '-q', '-fdx');
  }
}

/** The hook's base: router fra1 and the default policy of the good fixture, no sessions. */
const good = join(import.meta.dirname, '../fixtures/validate/good');

describe('pre-receive hook: entries it does not read as manifests', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-hook-entries-'));
    bare = join(dir, 'store.git');
    work = join(dir, 'work');
    await exec('git', ['init', '-q', '--bare', '-b', 'main', bare]);
    await installPreReceiveHook(bare, { entry });
    await exec('git', ['init', '-q', '-b', 'main', work]);
    for (const path of ['routers/fra1.yaml', 'policy/default.yaml']) {
      await mkdir(dirname(join(work, path)), { recursive: true });
      await copyFile(join(good, path), join(work, path));
    }
    await commit('a network');
    const first = await exec('git', ['push', bare, 'HEAD:refs/heads/main'], { cwd: work }).catch(
      (err: unknown) => err as { stderr: string },
    );
    expect('stderr' in first ? first.stderr : '').not.toContain('refused');
    expect(await git(bare, 'rev-parse', 'main')).toBe(await git(work, 'rev-parse', 'HEAD'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('takes a valid session, so the refusals below are the entries’ own', async () => {
    const result = await pushed(() => put('sessions/fra1/as4242420099.yaml', sessionYaml()));
    expect(result.stderr).not.toContain('peerops:');
    expect(result.ok).toBe(true);
    await git(bare, 'update-ref', 'refs/heads/main', 'main~1');
  });

  it('refuses a submodule (gitlink) under sessions/ and routers/', async () => {
    const head = await git(work, 'rev-parse', 'HEAD');
    const result = await pushed(async () => {
      await git(
        work,
        'update-index',
        '--add',
        '--cacheinfo',
        `160000,${head},sessions/fra1/as4242420098.yaml`,
      );
      await git(work, 'update-index', '--add', '--cacheinfo', `160000,${head},routers/vendor`);
    }, false);
    expect(result.ok).toBe(false);
    const why =
      'is a submodule (gitlink): the store reads only regular files here, a submodule never reaches it';
    expect(result.stderr).toContain(`remote: sessions/fra1/as4242420098.yaml: /: ${why}`);
    expect(result.stderr).toContain(`remote: routers/vendor: /: ${why}`);
    expect(result.stderr).toContain('remote: peerops: refs/heads/main refused: 2 problem(s)');
  });

  it('refuses a symbolic link, even to a valid manifest', async () => {
    const result = await pushed(async () => {
      await writeFile(join(dir, 'outside.yaml'), sessionYaml());
      await mkdir(join(work, 'sessions/fra1'), { recursive: true });
      await symlink(join(dir, 'outside.yaml'), join(work, 'sessions/fra1/as4242420099.yaml'));
    });
    expect(result.ok).toBe(false);
    expect(result.stderr).toContain(
      'remote: sessions/fra1/as4242420099.yaml: /: is a symbolic link: the store reads only regular files here, never what a link points to',
    );
  });

  it('refuses a file under the store’s folders that is not a manifest of the layout', async () => {
    const result = await pushed(() => put('sessions/fra1/notes.txt', 'to do\n'));
    expect(result.ok).toBe(false);
    expect(result.stderr).toContain(
      'remote: sessions/fra1/notes.txt: /: file path is not part of the layout',
    );
  });

  it('refuses a 40 MB manifest by the size git lists for it', async () => {
    const bytes = 40 * 1024 * 1024;
    const started = performance.now();
    const result = await pushed(() =>
      put('sessions/fra1/as4242420099.yaml', sessionYaml(`  note: "${'x'.repeat(bytes)}"\n`)),
    );
    expect(result.ok).toBe(false);
    expect(result.stderr).toMatch(
      new RegExp(
        `remote: sessions/fra1/as4242420099\\.yaml: /: is \\d+ bytes; this file may hold at most ${MANIFEST_LIMITS.bytes.PeeringSession} \\(64 KiB\\)`,
      ),
    );
    expect(performance.now() - started).toBeLessThan(30_000);
  });

  it('refuses the alias bomb with its line', async () => {
    const result = await pushed(() => put('sessions/fra1/as4242420099.yaml', aliasBomb(9)));
    expect(result.ok).toBe(false);
    expect(result.stderr).toContain(
      'remote: sessions/fra1/as4242420099.yaml: /: line 5: YAML anchor &a0: anchors and aliases are not allowed',
    );
  });
});
