/**
 * Self-update against a local HTTP server (127.0.0.1) that serves a release listing in the GitHub API
 * format, real release artifacts built by scripts/build-release.ts, and the controller's
 * /agent/:router/config. Releases are signed with `ssh-keygen -Y sign` and an SSH key made for the test
 * (its public key is the agent's autoUpdate.publicKeys). Good checksum → swapped, previous kept, process exits for its restart
 * and the new file answers the new version; bad checksum, a checksum list not signed by a trusted key,
 * or no trusted key at all → refused, the running file untouched; `enabled: false` from the controller
 * → nothing listed, nothing downloaded.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFile, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { autoUpdateFrom } from './update-controller.ts';
import { AGENT_NODE_ARGS } from '../../agent/node-args.ts';
import { ARTIFACT_NAME, CHECKSUMS_NAME, previousPath, rollback } from '../../agent/update/install.ts';
import { endProbation, PROBATION_NAME, REJECTED_NAME } from '../../agent/update/probation.ts';
import { releasesUrl, selectRelease, type Release } from '../../agent/update/releases.ts';
import { RELEASE_NAMESPACE, SIGNATURE_NAME } from '../../agent/update/signature.ts';
import { checkForUpdate, RESTART_EXIT_CODE, runningArtifact } from '../../agent/update/updater.ts';
import { parseConfig } from '../../agent/config.ts';
import type { BootstrapConfigResponse } from '../../common/agent-api.ts';
import { buildRelease } from '../../scripts/build-release.ts';

const run = promisify(execFile);
const TOKEN = 'test-token-0123456789';
let root: string;
let server: Server;
let base: string;
/** Served files: URL path → bytes. */
const files = new Map<string, Buffer>();
let listing: Release[] = [];
let autoUpdateEnabled = true;
const hits = { listing: 0, downloads: 0 };
let keyCount = 0;
/** A new SSH key pair in the test's directory; answers the private key's file. */
async function newSigningKey(): Promise<string> {
  const file = path.join(root, `key-${keyCount++}`);
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'test release key', '-f', file]);
  return file;
}
/** `ssh-keygen -Y sign` of `data` with `key` in `namespace`: the armored signature. */
async function sshSign(data: Buffer, key: string, namespace = RELEASE_NAMESPACE): Promise<Buffer> {
  const file = path.join(root, `signed-${keyCount++}`);
  await writeFile(file, data);
  await run('ssh-keygen', ['-Y', 'sign', '-q', '-f', key, '-n', namespace, file]);
  return readFile(`${file}.sig`);
}
let signingKey: string;
/** The public key of signingKey: what the agents trust. */
let releaseKey = '';

function bootstrap(): BootstrapConfigResponse {
  return {
    node: { name: 'r1', id: 1, region: 'eu', location: 'x', provider: 'y' },
    asn: 4242420101,
    loopback: {},
    tunnel: { dn42Ipv4: '', dn42Ipv6: '', dn42Ipv6LinkLocal: 'fe80::1' },
    controlPlane: { heartbeatInterval: 30, syncInterval: 60, metricInterval: 60 },
    metric: { pingTimeout: 5, pingCount: 4, pingWorkers: 32 },
    autoUpdate: { enabled: autoUpdateEnabled, channel: 'stable' },
    meshPeers: [],
    ibgpPeers: [],
  };
}

function release(tag: string, opts: { prerelease?: boolean; draft?: boolean } = {}): Release {
  return {
    tag_name: tag,
    prerelease: opts.prerelease ?? false,
    draft: opts.draft ?? false,
    assets: [ARTIFACT_NAME, CHECKSUMS_NAME, SIGNATURE_NAME].map((name) => ({
      name,
      browser_download_url: `${base}/download/${tag}/${name}`,
    })),
  };
}

async function sha256(file: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(file))
    .digest('hex');
}

/** A fresh install dir holding release 0.1.0 as the running file (and its launcher, when asked). */
async function install(withLauncher = false): Promise<string> {
  const dir = await mkdtemp(path.join(root, 'install-'));
  await copyFile(path.join(root, 'v0.1.0', ARTIFACT_NAME), path.join(dir, ARTIFACT_NAME));
  if (withLauncher) await copyFile(path.join(root, 'v0.1.0', 'peerops'), path.join(dir, 'peerops'));
  return path.join(dir, ARTIFACT_NAME);
}

/** checkForUpdate as the agent runs it: version 0.1.0, the test's mirror, the controller's switch. */
function checkAsAgent(
  installPath: string,
  restart: () => void = () => {
    throw new Error('must not restart');
  },
  localEnabled = true,
  publicKeys = [releaseKey],
) {
  return checkForUpdate({
    local: {
      enabled: localEnabled,
      checkInterval: 60,
      channel: 'stable',
      releaseRepo: `${base}/mirror/acme/peerops`,
      publicKeys,
    },
    controller: () => autoUpdateFrom(base, TOKEN),
    installPath,
    currentVersion: '0.1.0',
    restart,
  });
}

/**
 * The update as the agent's updater does it, in a child process that exits for its restart, on node with
 * the agent's options (agent/node-args.ts: fetch needs the WebAssembly that --lite-mode would remove).
 */
async function updateInChild(installPath: string): Promise<{ code: number; stderr: string }> {
  return run(process.execPath, [...AGENT_NODE_ARGS, path.join(import.meta.dirname, 'update-child.ts')], {
    env: {
      ...process.env,
      PEEROPS_TEST_UPDATE: JSON.stringify({
        controlPlane: base,
        releaseRepo: `${base}/mirror/acme/peerops`,
        installPath,
        currentVersion: '0.1.0',
        publicKeys: [releaseKey],
      }),
    },
  }).then(
    (r) => ({ code: 0, stderr: r.stderr }),
    (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
  );
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'apupd-'));
  signingKey = await newSigningKey();
  for (const v of ['0.1.0', '0.2.0'])
    releaseKey =
      (await buildRelease(v, path.join(root, `v${v}`), { signingKey, assets: 'agent' })).publicKey ?? '';
  server = createServer((req, res) => {
    const url = req.url ?? '';
    if (url === '/mirror/repos/acme/peerops/releases') {
      hits.listing++;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(listing));
    } else if (url === '/agent/r1/config') {
      if (req.headers.authorization !== `Bearer ${TOKEN}`) {
        res.statusCode = 401;
        res.end();
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(bootstrap()));
    } else if (files.has(url)) {
      if (url.endsWith(ARTIFACT_NAME)) hits.downloads++;
      res.end(files.get(url));
    } else {
      res.statusCode = 404;
      res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const v2 = path.join(root, 'v0.2.0');
  files.set('/download/v0.2.0/peerops.mjs', await readFile(path.join(v2, ARTIFACT_NAME)));
  const sums = await readFile(path.join(v2, CHECKSUMS_NAME));
  files.set('/download/v0.2.0/SHA256SUMS', sums);
  files.set('/download/v0.2.0/SHA256SUMS.sig', await readFile(path.join(v2, SIGNATURE_NAME)));
  // the same artifact under a release whose (signed) checksum list does not match it
  const wrong = Buffer.from(`${'ab'.repeat(32)}  ${ARTIFACT_NAME}\n`);
  files.set('/download/v0.2.1/peerops.mjs', await readFile(path.join(v2, ARTIFACT_NAME)));
  files.set('/download/v0.2.1/SHA256SUMS', wrong);
  files.set('/download/v0.2.1/SHA256SUMS.sig', await sshSign(wrong, signingKey));
  // a mirror's own build: right checksums, signed by a key nobody trusts
  files.set('/download/v0.3.0/peerops.mjs', await readFile(path.join(v2, ARTIFACT_NAME)));
  files.set('/download/v0.3.0/SHA256SUMS', sums);
  files.set('/download/v0.3.0/SHA256SUMS.sig', await sshSign(sums, await newSigningKey()));
  // the publisher's signature, over a checksum list the mirror changed
  const altered = Buffer.from(sums.toString().replace(/^[0-9a-f]{64}/, 'cd'.repeat(32)));
  files.set('/download/v0.3.1/peerops.mjs', await readFile(path.join(v2, ARTIFACT_NAME)));
  files.set('/download/v0.3.1/SHA256SUMS', altered);
  files.set('/download/v0.3.1/SHA256SUMS.sig', await readFile(path.join(v2, SIGNATURE_NAME)));
  // the publisher's key, but a signature made for another purpose (a login's namespace)
  files.set('/download/v0.3.2/peerops.mjs', await readFile(path.join(v2, ARTIFACT_NAME)));
  files.set('/download/v0.3.2/SHA256SUMS', sums);
  files.set('/download/v0.3.2/SHA256SUMS.sig', await sshSign(sums, signingKey, 'peerops'));
}, 120_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await rm(root, { recursive: true, force: true });
});

describe('release selection', () => {
  const rels = [
    { ...release('v0.2.0') },
    { ...release('v0.3.0-beta.1', { prerelease: true }) },
    { ...release('v0.3.0-rc.2', { prerelease: true }) },
    { ...release('v0.4.0-nightly.5', { prerelease: true }) },
    { ...release('v9.0.0', { draft: true }) },
    { ...release('not-a-version') },
  ];
  it('stable takes only full releases, beta adds -beta/-rc, dev takes every non-draft', () => {
    expect(selectRelease(rels, 'stable', '0.1.0')?.version).toBe('0.2.0');
    expect(selectRelease(rels, 'beta', '0.1.0')?.version).toBe('0.3.0-rc.2');
    expect(selectRelease(rels, 'dev', '0.1.0')?.version).toBe('0.4.0-nightly.5');
    expect(selectRelease(rels, 'stable', '0.2.0')).toBeUndefined();
    expect(selectRelease(rels, 'stable', 'v0.3.0')).toBeUndefined();
  });
  it('lists from the GitHub API or a mirror base URL', () => {
    expect(releasesUrl('acme/peerops')).toBe('https://api.github.com/repos/acme/peerops/releases');
    expect(releasesUrl('http://127.0.0.1:8080/mirror/acme/peerops')).toBe(
      'http://127.0.0.1:8080/mirror/repos/acme/peerops/releases',
    );
    expect(() => releasesUrl('acme')).toThrow(/autoUpdate.releaseRepo/);
  });
  it('only a release artifact is swapped', () => {
    expect(runningArtifact('/opt/peerops/peerops.mjs')).toBe('/opt/peerops/peerops.mjs');
    expect(runningArtifact('/work/main/bin/peerops.ts')).toBeUndefined();
  });
});

describe('autoUpdate.publicKeys in the agent config', () => {
  const config = (publicKeys: string[]) => ({
    node: { name: 'r1' },
    controlPlane: { url: 'http://127.0.0.1:1', token: TOKEN },
    autoUpdate: { publicKeys },
  });
  it('takes SSH public key lines, as ssh-keygen writes them', () => {
    expect(
      parseConfig(config([releaseKey, `${releaseKey} release@peerops`]), 'agent.json').autoUpdate.publicKeys,
    ).toEqual([releaseKey, `${releaseKey} release@peerops`]);
  });
  it('refuses anything else, naming the key', () => {
    const raw = releaseKey.split(' ')[1]?.slice(-44) ?? '';
    expect(() => parseConfig(config([raw]), 'agent.json')).toThrow(/autoUpdate\/publicKeys\/0/);
  });
});

describe('release build', () => {
  it('the artifact carries its version and every command; SHA256SUMS covers it and the launcher', async () => {
    const dir = path.join(root, 'v0.2.0');
    expect((await run(process.execPath, [path.join(dir, ARTIFACT_NAME), 'agent', '--help'])).stdout).toMatch(
      /usage: peerops agent/,
    );
    const sums = await readFile(path.join(dir, CHECKSUMS_NAME), 'utf8');
    expect(sums).toContain(`${await sha256(path.join(dir, ARTIFACT_NAME))}  ${ARTIFACT_NAME}\n`);
    expect(sums).toContain(`${await sha256(path.join(dir, 'peerops'))}  peerops\n`);
    const launched = await run(path.join(dir, 'peerops'), ['--version'], {
      env: { ...process.env, PEEROPS_NODE: process.execPath },
    });
    expect(launched.stdout.trim()).toBe('0.2.0');
  });
});

describe('self-update', () => {
  it('good checksum: verified, swapped (previous kept), restarted into the new version', async () => {
    listing = [release('v0.2.0'), release('v0.2.1-beta.1', { prerelease: true })];
    autoUpdateEnabled = true;
    const installPath = await install();
    const child = await updateInChild(installPath);
    expect(child.code, child.stderr).toBe(RESTART_EXIT_CODE);
    // the supervisor starts the file again: it is the new release; the previous one is kept
    expect((await run(process.execPath, [installPath, '--version'])).stdout.trim()).toBe('0.2.0');
    expect((await run(process.execPath, [previousPath(installPath), '--version'])).stdout.trim()).toBe(
      '0.1.0',
    );
    expect(await readdir(path.dirname(installPath))).toEqual(
      [ARTIFACT_NAME, 'peerops.previous.mjs', PROBATION_NAME].sort(),
    );
    // the new version is on probation until its first good pass
    expect(await readFile(path.join(path.dirname(installPath), PROBATION_NAME), 'utf8')).toBe('0.2.0 0\n');
    expect(await endProbation(installPath)).toBe('0.2.0');
    expect(await endProbation(installPath)).toBeUndefined();
    await rollback(installPath);
    expect((await run(process.execPath, [installPath, '--version'])).stdout.trim()).toBe('0.1.0');
  }, 60_000);

  it('bad checksum: refused, the running file untouched', async () => {
    listing = [release('v0.2.1')];
    autoUpdateEnabled = true;
    const installPath = await install();
    const before = await sha256(installPath);
    const downloads = hits.downloads;
    let restarted = false;
    await expect(checkAsAgent(installPath, () => (restarted = true))).rejects.toThrow(
      /SHA256SUMS says (ab)+: refused/,
    );
    expect(hits.downloads).toBe(downloads + 1);
    expect(restarted).toBe(false);
    expect(await sha256(installPath)).toBe(before);
    expect(await readdir(path.dirname(installPath))).toEqual([ARTIFACT_NAME]);
  }, 30_000);

  it('a checksum list not signed by a trusted key is refused before anything is downloaded', async () => {
    const why = {
      'v0.3.0': 'it is signed by a key that is not in autoUpdate.publicKeys',
      'v0.3.1': 'the SSH signature does not verify over the signed message',
      'v0.3.2': "signature namespace is 'peerops', not 'peerops-release'",
    };
    for (const [tag, reason] of Object.entries(why)) {
      listing = [release(tag)];
      autoUpdateEnabled = true;
      const installPath = await install();
      const downloads = hits.downloads;
      await expect(checkAsAgent(installPath), tag).rejects.toThrow(
        `SHA256SUMS.sig of ${tag} does not show SHA256SUMS signed by a key of autoUpdate.publicKeys (${reason}): refused`,
      );
      expect(hits.downloads, tag).toBe(downloads);
      expect(await readdir(path.dirname(installPath))).toEqual([ARTIFACT_NAME]);
    }
  }, 30_000);

  it('without a trusted release key nothing is listed or installed', async () => {
    listing = [release('v0.2.0')];
    autoUpdateEnabled = true;
    const installPath = await install();
    const before = { ...hits };
    expect(await checkAsAgent(installPath, undefined, true, [])).toEqual({
      result: 'disabled',
      by: 'no-release-key',
    });
    expect(hits).toEqual(before);
  }, 30_000);

  it('enabled: false from the controller wins over the local setting: nothing downloaded', async () => {
    listing = [release('v0.2.0')];
    autoUpdateEnabled = false;
    const installPath = await install();
    const before = { ...hits };
    const outcome = await checkAsAgent(installPath);
    expect(outcome).toEqual({ result: 'disabled', by: 'controller' });
    expect(hits).toEqual(before);
    expect((await run(process.execPath, [installPath, '--version'])).stdout.trim()).toBe('0.1.0');
  }, 30_000);
});

describe('who may turn self-update off', () => {
  it('enabled: false in the file opts that node out although the controller allows it', async () => {
    listing = [release('v0.2.0')];
    autoUpdateEnabled = true;
    const installPath = await install();
    const before = { ...hits };
    const outcome = await checkAsAgent(installPath, undefined, false);
    expect(outcome).toEqual({ result: 'disabled', by: 'local' });
    expect(hits).toEqual(before);
    expect((await run(process.execPath, [installPath, '--version'])).stdout.trim()).toBe('0.1.0');
  }, 30_000);
});

describe('probation after a self-update', () => {
  it('a version that starts 3 times without a good pass is rolled back by the launcher and never installed again', async () => {
    listing = [release('v0.2.0')];
    autoUpdateEnabled = true;
    const installPath = await install(true);
    const dir = path.dirname(installPath);
    const child = await updateInChild(installPath);
    expect(child.code, child.stderr).toBe(RESTART_EXIT_CODE);
    const launcher = path.join(dir, 'peerops');
    const launch = (...args: string[]) =>
      run(launcher, args, { env: { ...process.env, PEEROPS_NODE: process.execPath } }).then(
        (r) => ({ code: 0, ...r }),
        (err: { code: number; stdout: string; stderr: string }) => err,
      );
    const probation = () => readFile(path.join(dir, PROBATION_NAME), 'utf8');
    // Other commands do not count; the agent here cannot run (its config is missing), as a release that
    // breaks on this router would not.
    expect((await launch('--version')).stdout.trim()).toBe('0.2.0');
    expect(await probation()).toBe('0.2.0 0\n');
    const missing = path.join(dir, 'missing.json');
    for (const starts of [1, 2, 3]) {
      expect((await launch('agent', '--config', missing)).code).not.toBe(0);
      expect(await probation()).toBe(`0.2.0 ${starts}\n`);
    }
    const fourth = await launch('agent', '--config', missing);
    expect(fourth.stderr).toMatch(/version 0\.2\.0 started 3 times without a good pass; rolling back/);
    expect((await launch('--version')).stdout.trim()).toBe('0.1.0');
    expect((await readdir(dir)).sort()).toEqual([ARTIFACT_NAME, 'peerops', REJECTED_NAME].sort());
    expect(await readFile(path.join(dir, REJECTED_NAME), 'utf8')).toBe('0.2.0\n');
    // The rolled-back version is skipped: nothing downloaded, the old version stays.
    const downloads = hits.downloads;
    const outcome = await checkAsAgent(installPath);
    expect(outcome).toEqual({ result: 'up-to-date', version: '0.1.0' });
    expect(hits.downloads).toBe(downloads);
  }, 60_000);

  it('a version confirmed by a good pass is not counted any more', async () => {
    listing = [release('v0.2.0')];
    autoUpdateEnabled = true;
    const installPath = await install(true);
    expect((await updateInChild(installPath)).code).toBe(RESTART_EXIT_CODE);
    expect(await endProbation(installPath)).toBe('0.2.0');
    const missing = path.join(path.dirname(installPath), 'missing.json');
    for (let i = 0; i < 4; i++)
      await run(path.join(path.dirname(installPath), 'peerops'), ['agent', '--config', missing], {
        env: { ...process.env, PEEROPS_NODE: process.execPath },
      }).catch(() => undefined);
    expect((await run(process.execPath, [installPath, '--version'])).stdout.trim()).toBe('0.2.0');
    expect((await readdir(path.dirname(installPath))).sort()).toEqual(
      [ARTIFACT_NAME, 'peerops', 'peerops.previous.mjs'].sort(),
    );
  }, 60_000);
});
