/**
 * examples/gitops-repo (docs/gitops.md): it passes `peerops validate`, a pull request on it passes
 * `--base`, its two workflow files are the ones docs/gitops.md gives to copy, and their steps run as
 * written: the release tarball (packed as the release build packs it, served on loopback in place of the
 * release's asset) installed after its SHA-256 check, then `peerops validate --base` on a pull request.
 * The runner itself cannot run here; its `${{ … }}` expressions are given the values a runner gives.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../cli/validate.ts';
import { packNpm } from '../../scripts/build-release.ts';

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
    }
  });

  it("runs each workflow's steps as written: a checked install of the release tarball, then validate", async () => {
    const work = await mkdtemp(join(tmpdir(), 'peerops-workflow-'));
    const version = (
      JSON.parse(await readFile(resolve(example, '../../package.json'), 'utf8')) as { version: string }
    ).version;
    const tarball = await readFile(await packNpm(version, work));
    const sha256 = createHash('sha256').update(tarball).digest('hex');
    const server = createServer((req, res) => res.end(req.url === '/peerops.tgz' ? tarball : ''));
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const { port } = server.address() as { port: number };
    try {
      // the pull request's repository: main on "origin", a branch adding a session checked out
      const origin = join(work, 'origin');
      await cp(example, origin, { recursive: true });
      const git = (cwd: string, ...args: string[]) => exec('git', args, { cwd });
      await git(origin, 'init', '-q', '-b', 'main');
      await git(origin, 'add', '-A');
      await git(
        origin,
        '-c',
        'user.name=T',
        '-c',
        'user.email=t@example.net',
        'commit',
        '-q',
        '-m',
        'network',
      );
      const checkout = join(work, 'checkout');
      await git(work, 'clone', '-q', origin, checkout);
      for (const path of WORKFLOWS) {
        const workflow = load(await readFile(join(example, path), 'utf8')) as {
          jobs: { validate: { steps: { name?: string; run?: string; env?: Record<string, string> }[] } };
        };
        const steps = workflow.jobs.validate.steps.filter((s) => s.run !== undefined);
        expect(steps.map((s) => s.name)).toEqual([
          'Install peerops from its release tarball',
          'Validate the manifests against the base branch',
        ]);
        const vars = {
          PEEROPS_TARBALL_URL: `http://127.0.0.1:${port}/peerops.tgz`,
          PEEROPS_TARBALL_SHA256: sha256,
        };
        const prefix = join(work, `npm-${path.split('/')[0]!.slice(1)}`);
        await mkdir(prefix);
        const runStep = (
          step: { run?: string; env?: Record<string, string> },
          values: Record<string, string>,
        ) => {
          // what the runner does: expressions substituted, the step's env set, `bash -e` on the script
          const expand = (text: string) =>
            text.replace(/\$\{\{ (vars|github)\.(\w+) \}\}/g, (_, scope: string, name: string) =>
              scope === 'github' && name === 'base_ref' ? 'main' : (values[name] ?? ''),
            );
          const env = Object.fromEntries(Object.entries(step.env ?? {}).map(([k, v]) => [k, expand(v)]));
          return exec('bash', ['--noprofile', '--norc', '-eo', 'pipefail', '-c', expand(step.run!)], {
            cwd: checkout,
            env: {
              ...process.env,
              ...env,
              RUNNER_TEMP: work,
              npm_config_prefix: prefix,
              PATH: `${join(prefix, 'bin')}:${process.env.PATH}`,
            },
          });
        };
        // a tarball that is not the release's is refused before npm sees it
        await expect(runStep(steps[0]!, { ...vars, PEEROPS_TARBALL_SHA256: '0'.repeat(64) })).rejects.toThrow(
          /computed checksum did NOT match/,
        );
        expect(await readdir(prefix)).toEqual([]);
        await runStep(steps[0]!, vars);
        const { stdout } = await runStep(steps[1]!, vars);
        expect(stdout, path).toMatch(/peerops validate: ok: checked 0 file/);
      }
    } finally {
      server.close();
      await rm(work, { recursive: true, force: true });
    }
  }, 180_000);
});
