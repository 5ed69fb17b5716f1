/**
 * `peerops login` end to end: the executable as a child process against the real controller app
 * (git store, Ed25519 token issuer, problem+json, rate limits) listening on 127.0.0.1 with the login
 * plugin registered under both prefixes; the token it saves then opens `/session`.
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { load as loadYaml } from 'js-yaml';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main as login } from '../../cli/login.ts';
import { challengeText } from '../../common/login-challenge.ts';
import { buildApp } from '../../controller/app.ts';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { loadConfig } from '../../controller/config.ts';
import { createGitStore } from '../../controller/store/git/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { freePort } from '../support/ports.ts';
import { type GpgKey, gpgKey, type SshKey, sshKey, stopGpgAgent, tempDir, writeRegistry } from './support.ts';

const AS_SSH = 4242420201;
const AS_PGP = 4242420202;
const AS_ADMIN = 4242420203;

let dir: string;
let store: Store;
let tokens: TokenIssuer;
let registry: DirectoryRegistry;
let listed: SshKey;
let stranger: SshKey;
let pgp: GpgKey;

/** The controller app plus the login plugin at /login and /api/v1/login, listening on loopback. */
async function startController(serviceHost: string): Promise<{ app: FastifyInstance; url: string }> {
  const config = {
    ...loadConfig({ data: dir, listen: '127.0.0.1:0' }, {}),
    rateLimit: { perMinute: 100_000, agentPerMinute: 100_000 },
  };
  // the controller as `peerops serve` wires it: login on both prefixes
  const app = await buildApp({
    store,
    tokens,
    config,
    logger: false,
    login: { registry, serviceHost, admins: [AS_ADMIN] },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

function peerops(args: string[], env: Record<string, string>) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['bin/peerops.ts', 'login', ...args],
      { env: { PATH: process.env.PATH, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  dir = await tempDir('cli');
  store = createGitStore({ dir: path.join(dir, 'store.git'), logger: pino({ level: 'silent' }) });
  await store.start();
  tokens = new TokenIssuer(await loadOrCreateKey(path.join(dir, 'jwt-ed25519.pem')));
  await mkdir(path.join(dir, 'home', '.ssh'), { recursive: true });
  [listed, stranger, pgp] = await Promise.all([
    sshKey(path.join(dir, 'home', '.ssh'), 'ed25519'),
    sshKey(dir, 'ed25519', 'stranger'),
    gpgKey(path.join(dir, 'gnupg'), 'CLI User <cli@example.test>'),
  ]);
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: { [AS_SSH]: ['SSH-MNT'], [AS_PGP]: ['PGP-MNT'], [AS_ADMIN]: ['SSH-MNT'] },
    mntners: { 'SSH-MNT': [listed.publicLine], 'PGP-MNT': [`pgp-fingerprint ${pgp.fingerprint}`] },
  });
  registry = new DirectoryRegistry(path.join(dir, 'registry'));
});

afterAll(async () => {
  if (pgp) await stopGpgAgent(pgp.home);
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('peerops login', () => {
  let app: FastifyInstance;
  let url: string;
  beforeAll(async () => {
    ({ app, url } = await startController('127.0.0.1'));
  });
  afterAll(() => app?.close());

  /** The token of the current context in config.yaml (docs/cli.md, Contexts), a 0600 file. */
  async function expectSavedToken(configDir: string, asn: number, role: 'user' | 'admin'): Promise<string> {
    const file = path.join(configDir, 'config.yaml');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const config = loadYaml(await readFile(file, 'utf8')) as {
      'current-context'?: string;
      contexts: { name: string; token?: string }[];
    };
    const current = config.contexts.find((c) => c.name === config['current-context']);
    expect(current?.name).toMatch(new RegExp(`^AS${asn}@`));
    const token = current?.token ?? '';
    expect(tokens.verify(token)).toMatchObject({ asn, role });
    return token;
  }

  it('with --ssh-key: saves a 0600 token that opens /session', async () => {
    const configDir = path.join(dir, 'cfg-ssh');
    const r = await peerops(['--asn', `AS${AS_SSH}`, '--ssh-key', listed.path, '--url', url], {
      PEEROPS_CONFIG_DIR: configDir,
      HOME: path.join(dir, 'home'),
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`as AS${AS_SSH} \\(user\\) until \\d{4}-\\d\\d-\\d\\dT`));
    const token = await expectSavedToken(configDir, AS_SSH, 'user');
    const res = await fetch(`${url}/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ action: 'list' }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
  });

  it('with --gpg under /api/v1, an admin ASN picking its key from ~/.ssh by default', async () => {
    const pgpDir = path.join(dir, 'cfg-pgp');
    const r = await peerops(['--asn', String(AS_PGP), '--gpg', pgp.fingerprint, '--url', `${url}/api/v1`], {
      PEEROPS_CONFIG_DIR: pgpDir,
      GNUPGHOME: pgp.home,
      HOME: path.join(dir, 'home'),
    });
    expect(r.code, r.stderr).toBe(0);
    await expectSavedToken(pgpDir, AS_PGP, 'user');

    const adminDir = path.join(dir, 'cfg-admin');
    const a = await peerops(['--asn', String(AS_ADMIN), '--url', url], {
      PEEROPS_CONFIG_DIR: adminDir,
      HOME: path.join(dir, 'home'),
    });
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout).toMatch(/\(admin\)/);
    expect(a.stdout).not.toMatch(/replaced/);
    await expectSavedToken(adminDir, AS_ADMIN, 'admin');

    // a user login beside the saved admin token is a context of its own: the admin's stays
    const u = await peerops(['--asn', String(AS_SSH), '--ssh-key', listed.path, '--url', url], {
      PEEROPS_CONFIG_DIR: adminDir,
      HOME: path.join(dir, 'home'),
    });
    expect(u.code, u.stderr).toBe(0);
    expect(u.stdout).not.toMatch(/replaced/);
    await expectSavedToken(adminDir, AS_SSH, 'user');
    const saved = await readFile(path.join(adminDir, 'config.yaml'), 'utf8');
    expect(saved).toContain(`AS${AS_ADMIN}@`);
    // a second login to the same network and controller replaces that context's token, and says so
    // (a second later: a token of the same second would be the same token)
    await new Promise((r) => setTimeout(r, 1100));
    const again = await peerops(['--asn', String(AS_SSH), '--ssh-key', listed.path, '--url', url], {
      PEEROPS_CONFIG_DIR: adminDir,
      HOME: path.join(dir, 'home'),
    });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(
      new RegExp(`It replaced the token saved before: AS${AS_SSH} \\(user\\), valid until \\d{4}-`),
    );
  });

  it('a key not listed: exit 1 with AUTH_FAILED, no token written', async () => {
    const configDir = path.join(dir, 'cfg-stranger');
    const r = await peerops(['--asn', String(AS_SSH), '--ssh-key', stranger.path, '--url', url], {
      PEEROPS_CONFIG_DIR: configDir,
      HOME: path.join(dir, 'home'),
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/AUTH_FAILED: .*not listed/);
    await expect(stat(path.join(configDir, 'config.yaml'))).rejects.toThrow(/ENOENT/);
  });

  it('usage errors exit 2', async () => {
    const r = await peerops(['--ssh-key', listed.path], { HOME: path.join(dir, 'home') });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--asn is required/);
  });

  it('an unreachable service is a clear error', async () => {
    // a port nothing listens on (fetch refuses some low ports before connecting: take a free one)
    const port = await freePort();
    const r = await peerops(['--asn', String(AS_SSH), '--url', `http://127.0.0.1:${port}`], {
      HOME: path.join(dir, 'home'),
    });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(new RegExp(`http://127\\.0\\.0\\.1:${port}`));
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('peerops login refuses a challenge for another host', () => {
  it('does not sign when the challenge names a host other than the URL', async () => {
    const { app, url } = await startController('peering.elsewhere.test');
    try {
      const r = await peerops(['--asn', String(AS_SSH), '--ssh-key', listed.path, '--url', url], {
        PEEROPS_CONFIG_DIR: path.join(dir, 'cfg-relay'),
        HOME: path.join(dir, 'home'),
      });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/challenge is for host 'peering.elsewhere.test'.*refusing to sign/);
    } finally {
      await app.close();
    }
  });
});

describe('peerops login signs nothing but a peerops challenge for this host and ASN', () => {
  it('refuses relayed, foreign and crafted challenges from a hostile server, never reaching verify', async () => {
    let answer: Record<string, unknown> = {};
    let verifies = 0;
    // A stand-in for a hostile controller: it answers the challenge request with whatever the case needs.
    const hostile = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if ((JSON.parse(body) as { action: string }).action === 'verify') verifies++;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((r) => hostile.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
    const expiresAt = Date.now() + 60_000;
    const text = (host: string, asn = AS_SSH) =>
      challengeText({ host, asn, nonce: 'n'.repeat(43), expiresAt });
    const cases: [string, Record<string, unknown>, RegExp][] = [
      [
        'relayed from another service',
        { host: '127.0.0.1', challenge: text('peering.victim.test') },
        /challenge is for host 'peering.victim.test'/,
      ],
      [
        'a git commit',
        { host: '127.0.0.1', challenge: 'tree 4b825dc6\nauthor x <x@y> 0 +0000\n\nhi\n', namespace: 'git' },
        /not a peerops login challenge/,
      ],
      [
        'another ASN',
        { host: '127.0.0.1', challenge: text('127.0.0.1', 4242420999), namespace: 'peerops' },
        /for AS4242420999, not AS4242420201/,
      ],
      [
        'the git namespace',
        { host: '127.0.0.1', challenge: text('127.0.0.1'), namespace: 'git' },
        /namespace 'git'/,
      ],
    ];
    try {
      for (const [what, body, refusal] of cases) {
        answer = { expiresAt: new Date(expiresAt).toISOString(), namespace: 'peerops', methods: [], ...body };
        const r = await peerops(['--asn', String(AS_SSH), '--ssh-key', listed.path, '--url', url], {
          PEEROPS_CONFIG_DIR: path.join(dir, 'cfg-hostile'),
          HOME: path.join(dir, 'home'),
        });
        expect(r.code, what).toBe(1);
        expect(r.stderr, what).toMatch(refusal);
        expect(r.stderr, what).toMatch(/refusing to sign/);
      }
      expect(verifies).toBe(0);
      await expect(stat(path.join(dir, 'cfg-hostile', 'token'))).rejects.toThrow(/ENOENT/);
    } finally {
      await new Promise<void>((r) => hostile.close(() => r()));
    }
  });
});

describe('peerops login in-process', () => {
  it('--help exits 0; an unknown option exits 2', async () => {
    expect(await login(['--help'])).toBe(0);
    expect(await login(['--frobnicate'])).toBe(2);
    expect(await login(['--asn', '1', '--ssh-key', 'a', '--gpg', 'b'])).toBe(2);
  });
});
