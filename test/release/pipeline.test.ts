/**
 * The release pipeline's steps (scripts/release/, docs/release.md#the-release-pipeline), run here as the
 * workflows run them, with throwaway keys made for the test: the keys imported from "secrets", the
 * tag's check, the build and signature, the operators' verification (and a tampered file refused), the
 * APT pool fetched back from a loopback server, and each publishing step as a dry run (npm publish
 * --dry-run, skopeo into a local OCI layout, a pages branch pushed to a local bare repository). The
 * images are left out of the build (PEEROPS_RELEASE_IMAGES=0: test/image builds them); the image step
 * copies a small OCI image made with umoci instead. actionlint over the workflows runs in npm run lint
 * and in the test step here.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, stat, writeFile, cp, appendFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const REPO = path.join(import.meta.dirname, '..', '..');
const VERSION = (JSON.parse(await readFile(path.join(REPO, 'package.json'), 'utf8')) as { version: string })
  .version;

let work: string;
let env: NodeJS.ProcessEnv;

/** Runs one step as the workflow does (`bash scripts/release/<step>.sh`); answers its output. */
async function step(name: string, args: string[] = [], extra: NodeJS.ProcessEnv = {}): Promise<string> {
  const t0 = performance.now();
  const { stdout, stderr } = await run(
    'bash',
    [path.join(REPO, 'scripts', 'release', `${name}.sh`), ...args],
    {
      cwd: REPO,
      env: { ...env, ...extra },
      maxBuffer: 32 * 1024 * 1024,
    },
  );
  console.log(`${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return stdout + stderr;
}

async function failure(name: string, args: string[], extra: NodeJS.ProcessEnv = {}): Promise<string> {
  const error = await step(name, args, extra).then(
    () => undefined,
    (e: unknown) => e as { stderr: string; stdout: string },
  );
  expect(error, `${name} should fail`).toBeDefined();
  return `${error?.stdout ?? ''}${error?.stderr ?? ''}`;
}

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'peerops-pipeline-'));
  // the "secrets": an SSH release key and an OpenPGP APT key, made in a keyring the steps never see
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'release@peerops', '-f', `${work}/ssh`]);
  const secretHome = path.join(work, 'gnupg-secret');
  await run('mkdir', ['-m', '700', secretHome, path.join(work, 'gnupg')]);
  const gpg = (...args: string[]) => run('gpg', ['--batch', '--homedir', secretHome, ...args]);
  await gpg(
    '--passphrase',
    '',
    '--quick-gen-key',
    'peerops APT test <apt@peerops>',
    'ed25519',
    'sign',
    'never',
  );
  const aptKey = (await gpg('--armor', '--export-secret-keys', 'apt@peerops')).stdout;
  env = {
    ...process.env,
    GNUPGHOME: path.join(work, 'gnupg'),
    GITHUB_REF_TYPE: 'tag',
    GITHUB_REF_NAME: `v${VERSION}`,
    GITHUB_ENV: path.join(work, 'github-env'),
    GITHUB_OUTPUT: path.join(work, 'github-output'),
    RUNNER_TEMP: work,
    PEEROPS_RELEASE_DIR: path.join(work, 'release'),
    PEEROPS_APT_REPO: path.join(work, 'apt'),
    PEEROPS_CHART_DIR: path.join(work, 'chart'),
    PEEROPS_RELEASE_IMAGES: '0',
    PEEROPS_RELEASE_DRY_RUN: '1',
    PEEROPS_RELEASE_SSH_KEY: await readFile(`${work}/ssh`, 'utf8'),
    PEEROPS_APT_GPG_KEY: aptKey,
  };
  await writeFile(env.GITHUB_ENV!, '');
  await writeFile(env.GITHUB_OUTPUT!, '');
}, 120_000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the release pipeline, step by step', () => {
  it('refuses a tag that is not package.json version', async () => {
    const out = await failure('test', [], { GITHUB_REF_NAME: 'v9.9.9' });
    expect(out).toContain(`the tag says 9.9.9 but package.json says ${VERSION}`);
  });

  it('imports the keys from the secrets and names them for the next steps', async () => {
    await step('import-keys');
    const lines = Object.fromEntries(
      (await readFile(env.GITHUB_ENV!, 'utf8'))
        .trim()
        .split('\n')
        .map((l) => l.split(/=(.*)/s).slice(0, 2)),
    ) as Record<string, string>;
    expect((await stat(lines.PEEROPS_RELEASE_SIGNING_KEY!)).mode & 0o777).toBe(0o600);
    expect(lines.PEEROPS_APT_SIGNING_KEY).toMatch(/^[0-9A-F]{40}$/);
    Object.assign(env, lines);
  });

  it('runs the test step (types, actionlint, a test subset), builds, signs and verifies', async () => {
    const [tested, built] = await Promise.all([
      step('test', [], { PEEROPS_RELEASE_TESTS: 'test/docs/doc-paths.test.ts' }),
      step('build'),
    ]);
    expect(tested).toMatch(/^\d+ passed, 0 failed$/m);
    expect(built).toContain(`release ${VERSION} in ${env.PEEROPS_RELEASE_DIR}: 9 files`);
    expect(built).toContain(`peerops-${VERSION}.tgz`);
    expect(await readdir(env.PEEROPS_CHART_DIR!)).toEqual([`peerops-${VERSION}.tgz`]);
    const verified = await step('verify');
    expect(verified).toContain('Good "peerops-release" signature for release@peerops');
    expect(verified).toContain('Good signature from "peerops APT test <apt@peerops>"');
    expect(verified).toContain(`verify: release ${VERSION}, its APT repository and chart check out`);

    // a file changed after signing: verify refuses it
    const tampered = path.join(work, 'tampered');
    await cp(env.PEEROPS_RELEASE_DIR!, tampered, { recursive: true });
    await appendFile(path.join(tampered, 'peerops'), '\n# changed\n');
    const out = await failure('verify', [], { PEEROPS_RELEASE_DIR: tampered });
    expect(out).toMatch(/peerops: FAILED/);
  }, 600_000);

  it('fetches the published APT pool back (404: an empty pool; other failures stop)', async () => {
    const root = env.PEEROPS_APT_REPO!;
    const server: Server = createServer((req, res) => {
      const file = path.join(root, path.normalize(decodeURIComponent(req.url ?? '/')));
      readFile(file).then(
        (body) => res.end(body),
        () => {
          res.statusCode = req.url?.startsWith('/broken') ? 500 : 404;
          res.end();
        },
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const fetched = path.join(work, 'apt-fetched');
      const out = await step('fetch-apt', [base], { PEEROPS_APT_REPO: fetched });
      expect(out).toContain('fetch-apt: 4 package files');
      const deb = `pool/main/p/peerops-agent/peerops-agent_${VERSION}_all.deb`;
      expect(await readFile(path.join(fetched, deb))).toEqual(await readFile(path.join(root, deb)));
      expect(
        await step('fetch-apt', [`${base}/none`], { PEEROPS_APT_REPO: path.join(work, 'apt-empty') }),
      ).toContain('starting with an empty pool');
      expect(
        await failure('fetch-apt', [`${base}/broken`], { PEEROPS_APT_REPO: path.join(work, 'apt-x') }),
      ).toContain('answered 500');
    } finally {
      server.close();
    }
  });

  it('runs every publishing step as a dry run', async () => {
    const npm = await step('publish-npm');
    expect(npm).toContain(`peerops@${VERSION}`);
    expect(npm).toContain('(dry-run)');

    // a small real OCI image in the build's name scheme, for the skopeo copy
    const layout = path.join(work, 'image');
    await run('umoci', ['init', '--layout', layout]);
    await run('umoci', ['new', '--image', `${layout}:latest`]);
    await run('tar', [
      '-C',
      layout,
      '-cf',
      path.join(env.PEEROPS_RELEASE_DIR!, `peerops-test-${VERSION}.oci.tar`),
      '.',
    ]);
    const images = await step('publish-images');
    expect(images).toContain(`oci:${env.PEEROPS_RELEASE_DIR}/oci-layout:peerops-test:${VERSION}`);
    expect(await readFile(env.GITHUB_OUTPUT!, 'utf8')).toMatch(/^test-digest=sha256:[0-9a-f]{64}$/m);
    const index = await readFile(path.join(env.PEEROPS_RELEASE_DIR!, 'oci-layout', 'index.json'), 'utf8');
    expect(index).toContain(`peerops-test:${VERSION}`);

    const chart = await step('publish-chart');
    expect(chart).toContain('dry run: helm push skipped');
    expect(chart).toContain(`version: ${VERSION}`);

    const assets = await step('publish-assets');
    expect(assets).toContain(`would create release v${VERSION} (prerelease: false)`);
    expect(assets).toContain('SHA256SUMS.sig');

    expect(await step('publish-apt')).toMatch(/publish-apt: \d+ files of .* on the pages branch of/);
  }, 300_000);
});
