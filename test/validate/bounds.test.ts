/**
 * Manifests bounded before they are judged (docs/store.md, "What the store refuses"):
 * `peerops validate` refuses a YAML alias bomb at once instead of walking its 9^levels values, and refuses
 * anchors, files over the size bound, nesting over the depth bound and metadata keys the schema does not
 * name, each with the file, line and reason.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../cli/validate.ts';
import { MANIFEST_LIMITS } from '../../common/manifests.ts';
import { aliasBomb, sessionYaml } from './hostile-manifests.ts';

const good = resolve(import.meta.dirname, '../fixtures/validate/good');
const FILE = 'sessions/fra1/as4242420099.yaml';

let dir: string;

const exec = promisify(execFile);
const LINK = 'sessions/fra1/as4242420098.yaml';
const SYMLINK = 'is a symbolic link: the store reads only regular files here, never what a link points to';
const SUBMODULE =
  'is a submodule (gitlink): the store reads only regular files here, a submodule never reaches it';

/** `peerops validate [args] <target>` in-process: exit status, stdout lines, and how long it took. */
async function validateDir(
  target = dir,
  ...args: string[]
): Promise<{ code: number; out: string[]; ms: number }> {
  const out: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
  const started = performance.now();
  try {
    const code = await main([...args, target]);
    return { code, out, ms: performance.now() - started };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

/** The lines `peerops validate` printed about FILE: its problems, or ok (not the count after them). */
const about = (out: string[]) => out.filter((l) => l.startsWith(`${FILE}: /`) || l === `${FILE}: ok`);

describe('peerops validate: bounded manifests', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-bounds-'));
    await cp(good, dir, { recursive: true });
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it.each([7, 9])(
    'refuses the %i-level alias bomb in well under a second, naming the line',
    async (levels) => {
      const text = aliasBomb(levels);
      expect(text.length).toBeLessThan(1000);
      await writeFile(join(dir, FILE), text);
      const { code, out, ms } = await validateDir();
      expect(code).toBe(1);
      expect(about(out)).toEqual([
        `${FILE}: /: line 5: YAML anchor &a0: anchors and aliases are not allowed, a manifest spells out every value`,
      ]);
      expect(ms).toBeLessThan(1000);
    },
  );

  it('refuses an alias even without an anchor it could name', async () => {
    await writeFile(join(dir, FILE), sessionYaml('  note: *nothing\n'));
    const { out } = await validateDir();
    expect(about(out)).toEqual([
      `${FILE}: /: line 5: YAML alias *nothing: anchors and aliases are not allowed, a manifest spells out every value`,
    ]);
  });

  it('refuses a session over the size bound before parsing it, and nesting over the depth bound', async () => {
    const limit = MANIFEST_LIMITS.bytes.PeeringSession;
    const big = sessionYaml(`  note: '${'x'.repeat(limit)}'\n`);
    await writeFile(join(dir, FILE), big);
    let { out } = await validateDir();
    expect(about(out)).toEqual([
      `${FILE}: /: is ${Buffer.byteLength(big)} bytes; this file may hold at most ${limit} (64 KiB)`,
    ]);

    const depth = MANIFEST_LIMITS.depth;
    await writeFile(join(dir, FILE), sessionYaml(`  deep: ${'['.repeat(depth)}${']'.repeat(depth)}\n`));
    ({ out } = await validateDir());
    expect(about(out)).toEqual([
      `${FILE}: /: line 5: nests deeper than ${depth} levels; no manifest needs more`,
    ]);
  });

  it('refuses metadata keys the schema does not name; name, labels and annotations pass', async () => {
    await writeFile(join(dir, FILE), sessionYaml('  uid: 1\n  resourceVersion: "7"\n'));
    let { out } = await validateDir();
    expect(about(out)).toEqual([
      `${FILE}: /metadata/uid: is not a known field`,
      `${FILE}: /metadata/resourceVersion: is not a known field`,
    ]);
    await writeFile(
      join(dir, FILE),
      sessionYaml('  labels:\n    team: noc\n  annotations:\n    peerops.dev/note: reviewed\n'),
    );
    ({ out } = await validateDir());
    expect(about(out)).toEqual([`${FILE}: ok`]);
  });

  it('refuses a symbolic link under the store’s folders, as the hook does, even to a valid manifest', async () => {
    await writeFile(join(dir, FILE), sessionYaml());
    await symlink(join(dir, FILE), join(dir, LINK));
    try {
      const { code, out } = await validateDir();
      expect(code).toBe(1);
      expect(out).toContain(`${LINK}: /: ${SYMLINK}`);
      expect(about(out)).toEqual([`${FILE}: ok`]);
    } finally {
      await rm(join(dir, LINK));
    }
  });
});

describe('peerops validate --base: entries git would not hold as files', () => {
  let repo: string;
  const git = (...args: string[]) =>
    exec('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.net', ...args], { cwd: repo });

  beforeAll(async () => {
    repo = await mkdtemp(join(tmpdir(), 'peerops-bounds-base-'));
    await cp(good, repo, { recursive: true });
    await git('init', '-q', '-b', 'main');
    await git('add', '-A');
    await git('commit', '-q', '-m', 'a network');
    await git('checkout', '-q', '-b', 'feature');
    const head = (await git('rev-parse', 'HEAD')).stdout.trim();
    // a submodule as a checkout holds one: a gitlink in the index, a directory in the work tree
    await git('update-index', '--add', '--cacheinfo', `160000,${head},sessions/vendor`);
    await mkdir(join(repo, 'sessions/vendor'));
    await writeFile(join(repo, FILE), aliasBomb(9));
    await symlink(join(repo, 'routers/fra1.yaml'), join(repo, 'routers/fra2.yaml'));
    await git('add', FILE, 'routers/fra2.yaml');
    await git('commit', '-q', '-m', 'a submodule, a link and a bomb');
  });
  afterAll(() => rm(repo, { recursive: true, force: true }));

  it('refuses each with its path, as the pre-receive hook would', async () => {
    const { code, out } = await validateDir(repo, '--base', 'main');
    expect(code).toBe(1);
    expect(out).toContain(`routers/fra2.yaml: /: ${SYMLINK}`);
    expect(out).toContain(`sessions/vendor: /: ${SUBMODULE}`);
    expect(about(out)).toEqual([
      `${FILE}: /: line 5: YAML anchor &a0: anchors and aliases are not allowed, a manifest spells out every value`,
    ]);
  });
});
