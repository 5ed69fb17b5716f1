/**
 * `peerops login` saves contexts (docs/cli.md, "Contexts"): two logins are two contexts, a login again
 * replaces only its own context's token, and ssh-keygen's own lines are shown only when it fails.
 */
import { execFile } from 'node:child_process';
import { mkdir, rm, stat } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig as loadCliConfig } from '../../cli/config.ts';
import { buildApp } from '../../controller/app.ts';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { loadConfig } from '../../controller/config.ts';
import { createGitStore } from '../../controller/store/git/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { type SshKey, sshKey, tempDir, writeRegistry } from '../login/support.ts';
import { freePort } from '../support/ports.ts';

const AS_USER = 4242420301;
const AS_ADMIN = 4242420302;

let dir: string;
let store: Store;
let app: FastifyInstance;
let url: string;
let tokens: TokenIssuer;
let key: SshKey;

function login(args: string[]) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['bin/peerops.ts', 'login', '--url', url, ...args],
      {
        env: { PATH: process.env.PATH, HOME: path.join(dir, 'home'), XDG_CONFIG_HOME: path.join(dir, 'xdg') },
        timeout: 60_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  dir = await tempDir('cli-ctx');
  store = createGitStore({ dir: path.join(dir, 'store.git'), logger: pino({ level: 'silent' }) });
  await store.start();
  tokens = new TokenIssuer(await loadOrCreateKey(path.join(dir, 'jwt-ed25519.pem')));
  await mkdir(path.join(dir, 'home', '.ssh'), { recursive: true });
  key = await sshKey(path.join(dir, 'home', '.ssh'), 'ed25519');
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: { [AS_USER]: ['CTX-MNT'], [AS_ADMIN]: ['CTX-MNT'] },
    mntners: { 'CTX-MNT': [key.publicLine] },
  });
  const config = {
    ...loadConfig({ data: dir, listen: '127.0.0.1:0' }, {}),
    rateLimit: { perMinute: 100_000, agentPerMinute: 100_000 },
  };
  app = await buildApp({
    store,
    tokens,
    config,
    logger: false,
    login: {
      registry: new DirectoryRegistry(path.join(dir, 'registry')),
      serviceHost: '127.0.0.1',
      admins: [AS_ADMIN],
    },
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await app?.close();
  await store?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('peerops login and contexts', () => {
  const host = () => new URL(url).host;
  const env = { PEEROPS_CONFIG_DIR: '' };

  it('a user login and an admin login are two contexts; the admin token is not replaced', async () => {
    const user = await login(['--asn', String(AS_USER), '--ssh-key', key.path]);
    expect(user.code, user.stderr).toBe(0);
    // ssh-keygen's "Signing file …" is kept to itself when it works
    expect(user.stderr).toBe('');
    expect(user.stdout).not.toMatch(/Signing/);
    expect(user.stdout).toContain(`Saved as context AS${AS_USER}@${host()} (now current)`);
    const admin = await login(['--asn', String(AS_ADMIN), '--ssh-key', key.path, '--context', 'ops']);
    expect(admin.code, admin.stderr).toBe(0);
    expect(admin.stdout).not.toMatch(/replaced/);

    const xdg = { XDG_CONFIG_HOME: path.join(dir, 'xdg'), ...env };
    const config = await loadCliConfig(xdg);
    expect(config.currentContext).toBe('ops');
    expect(config.contexts.map((c) => [c.name, c.url])).toEqual([
      [`AS${AS_USER}@${host()}`, url],
      ['ops', url],
    ]);
    const [userCtx, adminCtx] = config.contexts;
    expect(tokens.verify(userCtx?.token ?? '')).toMatchObject({ asn: AS_USER, role: 'user' });
    expect(tokens.verify(adminCtx?.token ?? '')).toMatchObject({ asn: AS_ADMIN, role: 'admin' });
    expect((await stat(path.join(dir, 'xdg', 'peerops', 'config.yaml'))).mode & 0o777).toBe(0o600);
  });

  it('logging in again to the same context says which token it replaced', async () => {
    // a second later: a token minted in the same second for the same claims is the same token
    await new Promise((r) => setTimeout(r, 1100));
    const again = await login(['--asn', String(AS_ADMIN), '--ssh-key', key.path, '--context', 'ops']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`It replaced the token saved before: AS${AS_ADMIN} \\(admin\\)`));
  });

  it("ssh-keygen's own words are shown when it fails", async () => {
    const res = await login(['--asn', String(AS_USER), '--ssh-key', path.join(dir, 'no-such-key')]);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/^peerops login: ssh-keygen -Y failed \(exit status \d+\):\n.*no-such-key/);
  });

  it('an unreachable controller: one line, exit 3', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const res = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        ['bin/peerops.ts', 'login', '--asn', '1', '--url', closed],
        {
          env: {
            PATH: process.env.PATH,
            HOME: path.join(dir, 'home'),
            XDG_CONFIG_HOME: path.join(dir, 'xdg'),
          },
        },
        (err, _stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stderr }),
      ),
    );
    expect(res).toEqual({
      code: 3,
      stderr: `peerops login: cannot reach the controller at ${closed}: connection refused\n`,
    });
  });
});
