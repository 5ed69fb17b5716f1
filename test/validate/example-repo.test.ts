/**
 * examples/gitops-repo (docs/gitops.md): it passes `peerops validate`, a pull request on it passes
 * `--base`, and its two workflow files are the ones docs/gitops.md gives to copy.
 */
import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../cli/validate.ts';

const exec = promisify(execFile);
const example = resolve(import.meta.dirname, '../../examples/gitops-repo');
const gitopsDoc = resolve(import.meta.dirname, '../../docs/gitops.md');
const WORKFLOWS = ['.github/workflows/validate.yml', '.forgejo/workflows/validate.yml'];

async function validate(argv: string[]): Promise<{ code: number; out: string[] }> {
  const out: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  try {
    return { code: await main(argv), out };
  } finally {
    vi.restoreAllMocks();
  }
}

describe('examples/gitops-repo', () => {
  afterEach(() => vi.restoreAllMocks());

  it('passes peerops validate', async () => {
    const { code, out } = await validate([example]);
    expect(out.at(-1)).toBe('peerops validate: ok: 2 router(s), 2 session(s), 1 policy file(s)');
    expect(code).toBe(0);
  });

  it('passes a pull request adding a session with --base, and its workflow files are those docs/gitops.md gives', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'peerops-example-'));
    const git = (...args: string[]) => exec('git', args, { cwd: dir });
    try {
      await cp(example, dir, { recursive: true });
      await git('init', '-q', '-b', 'main');
      await git('add', '-A');
      await git('-c', 'user.name=T', '-c', 'user.email=t@example.net', 'commit', '-q', '-m', 'network');
      await git('checkout', '-q', '-b', 'as4242421234');
      const session = await readFile(join(dir, 'sessions/ams1/as64512.yaml'), 'utf8');
      await writeFile(
        join(dir, 'sessions/ams1/as4242421234.yaml'),
        session
          .replaceAll('64512', '4242421234')
          .replace('fd42:fc00::1', 'fd42:1234::1')
          .replace('fe80::fc00', 'fe80::1234')
          .replace(/publicKey: .*/, `publicKey: ${Buffer.alloc(32, 7).toString('base64')}`),
      );
      const { code, out } = await validate(['--base', 'main', dir]);
      expect(out).toEqual([
        'sessions/ams1/as4242421234.yaml: ok',
        'peerops validate: ok: checked 1 file against main; 2 router(s), 3 session(s), 1 policy file(s) after the merge',
      ]);
      expect(code).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const doc = await readFile(gitopsDoc, 'utf8');
    for (const path of WORKFLOWS) {
      const text = await readFile(join(example, path), 'utf8');
      expect(doc, `${path} as docs/gitops.md gives it`).toContain(`\`\`\`yaml\n${text}\`\`\``);
      const workflow = load(text) as { jobs: { validate: { steps: { run?: string }[] } } };
      const run = workflow.jobs.validate.steps.map((s) => s.run).find((r) => r !== undefined);
      expect(run).toMatch(
        /^npx --yes peerops@\d+\.\d+\.\d+ validate --base origin\/\$\{\{ github\.base_ref \}\} /,
      );
    }
  });
});
