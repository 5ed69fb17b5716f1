import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { register } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProblem } from '../../common/errors.ts';
import {
  DirectoryRegistry,
  GitRegistry,
  openRegistry,
  parseUsersFile,
  UsersFileRegistry,
} from '../../controller/auth/login/registry.ts';
import { parseRpsl, values } from '../../controller/auth/login/rpsl.ts';
import { serveGit, type GitHttpServer } from '../support/git-http.ts';
import { buildApp, run, type SshKey, sshKey, sshSign, tempDir, writeRegistry } from './support.ts';

const AS1 = 4242420101;
const AS2 = 4242420102;

let dir: string;
let key: SshKey;
let other: SshKey;

beforeAll(async () => {
  dir = await tempDir('registry');
  [key, other] = await Promise.all([sshKey(dir, 'ed25519'), sshKey(dir, 'ecdsa')]);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('RPSL', () => {
  it('reads attributes, continuation lines and comments', () => {
    const attrs = parseRpsl(
      [
        '% comment',
        'mntner:             FOO-MNT',
        'descr:              first line',
        '                    second line',
        '+',
        '+                   after a blank',
        'auth:               ssh-ed25519 AAAAC3 user@host',
        'MNT-BY:             FOO-MNT   # trailing comment',
        '',
      ].join('\n'),
    );
    expect(values(attrs, 'descr')).toEqual(['first line\nsecond line\n\nafter a blank']);
    expect(values(attrs, 'auth')).toEqual(['ssh-ed25519 AAAAC3 user@host']);
    expect(values(attrs, 'mnt-by')).toEqual(['FOO-MNT   # trailing comment']);
  });
});

describe('directory registry', () => {
  it('follows every mnt-by and reports what it skipped', async () => {
    const root = path.join(dir, 'checkout');
    await writeRegistry(root, {
      autNums: { [AS1]: ['A-MNT', 'MISSING-MNT', 'B-MNT'] },
      mntners: {
        'A-MNT': ['crypt $1$old', 'PGPKEY-DEADBEEF'],
        'B-MNT': [key.publicLine, `PGP-FINGERPRINT ${'AB12 '.repeat(10)}`],
      },
    });
    const auth = await new DirectoryRegistry(root).lookup(AS1);
    expect(auth?.maintainers).toEqual(['A-MNT', 'MISSING-MNT', 'B-MNT']);
    expect(auth?.methods).toEqual([
      { type: 'ssh-ed25519', mntner: 'B-MNT', key: key.publicLine.split(' ')[1] },
      { type: 'pgp-fingerprint', mntner: 'B-MNT', fingerprint: 'ab12'.repeat(10) },
    ]);
    expect(auth?.skipped).toEqual([
      { mntner: 'A-MNT', line: 'auth: crypt $1$old', reason: "auth method 'crypt' is not supported" },
      {
        mntner: 'A-MNT',
        line: 'auth: PGPKEY-DEADBEEF',
        reason: 'key-cert PGPKEY-DEADBEEF: it is not in the registry',
      },
      {
        mntner: 'MISSING-MNT',
        line: 'mnt-by: MISSING-MNT',
        reason: 'mntner MISSING-MNT is not in the registry',
      },
    ]);
    expect(await new DirectoryRegistry(root).lookup(AS2)).toBeUndefined();
  });
});

describe('users file', () => {
  it('parses AS<n>: <auth line>, several lines per ASN', () => {
    const users = parseUsersFile(
      [
        '# peerops users',
        `AS${AS1}: ${key.publicLine}`,
        `as${AS1}:${other.publicLine}`,
        '',
        `${AS2}: pgp-fingerprint ${'0'.repeat(40)}`,
      ].join('\n'),
    );
    expect(users.get(AS1)?.map((m) => m.type)).toEqual(['ssh-ed25519', 'ecdsa-sha2-nistp256']);
    expect(users.get(AS2)).toEqual([
      { type: 'pgp-fingerprint', mntner: `AS${AS2}`, fingerprint: '0'.repeat(40) },
    ]);
  });

  it.each([
    ['AS1 ssh-ed25519 AAAA', /line 2: expected 'AS<number>: <auth line>'/],
    ['AS1: PGPKEY-12345678', /line 2: PGPKEY-12345678 needs a registry key-cert/],
    ['AS1: crypt $1$x', /line 2: auth method 'crypt' is not supported/],
    ['AS1: pgp-fingerprint 1234', /line 2: pgp-fingerprint must be 40/],
  ])('refuses %s with the line and reason', (line, message) => {
    expect(() => parseUsersFile(`# header\n${line}\n`, 'users')).toThrow(message);
  });

  it('logs a user in and keeps the last good copy when an edit does not parse', async () => {
    const file = path.join(dir, 'users');
    await writeFile(file, `AS${AS1}: ${key.publicLine}\n`);
    const reg = await openRegistry({ source: file });
    expect(reg).toBeInstanceOf(UsersFileRegistry);
    const app = await buildApp({ registry: reg });
    try {
      const c = (
        await app.inject({ method: 'POST', url: '/login', payload: { action: 'challenge', asn: AS1 } })
      ).json();
      const signature = await sshSign(key, c.challenge);
      const res = await app.inject({
        method: 'POST',
        url: '/login',
        payload: { action: 'verify', asn: AS1, challenge: c.challenge, signature },
      });
      expect(res.statusCode, res.body).toBe(200);
    } finally {
      await app.close();
    }
    await writeFile(file, `AS${AS1}: garbage\n`);
    expect((await reg.lookup(AS1))?.methods).toHaveLength(1);
  });

  it('a users file that does not parse stops the start', async () => {
    const file = path.join(dir, 'users-bad');
    await writeFile(file, 'nonsense\n');
    await expect(openRegistry({ source: file })).rejects.toThrow(/users-bad line 1/);
  });
});

describe('git registry over HTTP', () => {
  let server: GitHttpServer;
  let work: string;
  let url: string;
  const git = (...args: string[]) => run('git', ['-C', work, ...args]);

  beforeAll(async () => {
    const served = path.join(dir, 'served');
    await mkdir(served);
    await run('git', ['init', '-q', '--bare', '-b', 'master', path.join(served, 'registry.git')]);
    work = path.join(dir, 'work');
    await run('git', ['init', '-q', '-b', 'master', work]);
    await git('config', 'user.email', 'test@example.test');
    await git('config', 'user.name', 'test');
    await writeRegistry(work, { autNums: { [AS1]: ['A-MNT'] }, mntners: { 'A-MNT': [key.publicLine] } });
    // Incompressible bulk, so that a refresh that downloads everything again would show.
    await writeFile(path.join(work, 'data', 'bulk'), randomBytes(256 * 1024).toString('base64'));
    await git('add', '-A');
    await git('commit', '-q', '-m', 'registry v1');
    await git('push', '-q', path.join(served, 'registry.git'), 'master');
    server = await serveGit(served);
    url = `${server.url}/registry.git`;
  });

  afterAll(async () => {
    await server?.close();
  });

  async function gauge(): Promise<number> {
    const metric = register.getSingleMetric('peerops_registry_last_refresh_timestamp_seconds');
    return (await metric!.get()).values[0]?.value ?? 0;
  }

  async function packBytes(cacheDir: string): Promise<number> {
    const packs = path.join(cacheDir, 'objects', 'pack');
    const sizes = await Promise.all(
      (await readdir(packs)).map(async (f) => (await stat(path.join(packs, f))).size),
    );
    return sizes.reduce((a, b) => a + b, 0);
  }

  async function push(message: string): Promise<void> {
    await git('add', '-A');
    await git('commit', '-q', '-m', message);
    await git('push', '-q', path.join(dir, 'served', 'registry.git'), 'master');
  }

  it('clones, refreshes, and keeps the last good copy when a refresh fails', async () => {
    const cacheDir = path.join(dir, 'cache');
    const before = Date.now() / 1000;
    const reg = (await openRegistry({ source: url, cacheDir, refreshIntervalMs: 0 })) as GitRegistry;
    try {
      expect(reg).toBeInstanceOf(GitRegistry);
      // A shallow mirror: the registry's history is not fetched.
      expect((await readFile(path.join(cacheDir, 'shallow'), 'utf8')).trim()).toBe(reg.currentCommit);
      expect((await reg.lookup(AS1))?.methods.map((m) => m.type)).toEqual(['ssh-ed25519']);
      expect(await reg.lookup(AS2)).toBeUndefined();
      const firstRefresh = await gauge();
      expect(firstRefresh).toBeGreaterThanOrEqual(Math.floor(before));

      // A change upstream shows after a refresh.
      await writeRegistry(work, { autNums: { [AS2]: ['B-MNT'] }, mntners: { 'B-MNT': [other.publicLine] } });
      await push('add AS2');
      const packBefore = await packBytes(cacheDir);
      expect(await reg.refresh()).toBe(true);
      // Only the new objects came: a few KiB, not the 340 KiB tree again.
      expect((await packBytes(cacheDir)) - packBefore).toBeLessThan(32 * 1024);
      expect((await reg.lookup(AS2))?.methods.map((m) => m.type)).toEqual(['ecdsa-sha2-nistp256']);
      const good = reg.currentCommit;

      // The host goes down: the refresh fails, lookups still answer from the last good commit.
      server.failing = true;
      const gaugeBefore = await gauge();
      expect(await reg.refresh()).toBe(false);
      expect(reg.currentCommit).toBe(good);
      expect(await gauge()).toBe(gaugeBefore);
      expect((await reg.lookup(AS2))?.methods).toHaveLength(1);

      // A restart while the host is down starts from the cached good commit.
      const restarted = new GitRegistry({ url, cacheDir, refreshIntervalMs: 0 });
      await restarted.start();
      expect(restarted.currentCommit).toBe(good);
      expect(await restarted.lookup(AS2)).toBeDefined();
      await restarted.close();
      server.failing = false;

      // A commit without data/ is not a registry: refused, last good kept.
      await git('rm', '-q', '-r', 'data');
      await push('broken: no data');
      expect(await reg.refresh()).toBe(false);
      expect(reg.currentCommit).toBe(good);
      expect(await reg.lookup(AS1)).toBeDefined();
      await git('revert', '--no-edit', 'HEAD');
      await git('push', '-q', path.join(dir, 'served', 'registry.git'), 'master');
    } finally {
      await reg.close();
      server.failing = false;
    }
  });

  it('refreshes on its interval', async () => {
    const reg = new GitRegistry({
      url,
      cacheDir: path.join(dir, 'cache-interval'),
      ref: 'master',
      refreshIntervalMs: 100,
    });
    await reg.start();
    try {
      const AS3 = 4242420103;
      expect(await reg.lookup(AS3)).toBeUndefined();
      await writeRegistry(work, { autNums: { [AS3]: ['A-MNT'] }, mntners: {} });
      await push('add AS3');
      const deadline = Date.now() + 10_000;
      while (!(await reg.lookup(AS3)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(await reg.lookup(AS3)).toBeDefined();
    } finally {
      await reg.close();
    }
  });

  it('a server that never answers: the refresh times out, the last good copy stays', async () => {
    const reg = new GitRegistry({
      url,
      cacheDir: path.join(dir, 'cache-hang'),
      refreshIntervalMs: 0,
      fetchTimeoutMs: 500,
    });
    try {
      await reg.start();
      const good = reg.currentCommit;
      expect(good).toBeDefined();
      server.hanging = true;
      const started = Date.now();
      expect(await reg.refresh()).toBe(false);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(reg.currentCommit).toBe(good);
      expect(await reg.lookup(AS1)).toBeDefined();
    } finally {
      server.hanging = false;
      await reg.close();
    }
  });

  it('credentials in the URL are used but never shown', async () => {
    const withCreds = url.replace('http://', 'http://reader:s3cret-token@');
    const cacheDir = path.join(dir, 'cache-creds');
    const reg = new GitRegistry({ url: withCreds, cacheDir, refreshIntervalMs: 0 });
    const logged: string[] = [];
    const spy = new GitRegistry({
      url: withCreds.replace('/registry.git', '/missing.git'),
      cacheDir: path.join(dir, 'cache-creds-missing'),
      refreshIntervalMs: 0,
      log: {
        info: (o, m) => logged.push(JSON.stringify(o) + m),
        warn: (o, m) => logged.push(JSON.stringify(o) + m),
      },
    });
    try {
      await reg.start();
      expect(await reg.lookup(AS1)).toBeDefined();
      expect(await readFile(path.join(cacheDir, 'config'), 'utf8')).not.toContain('s3cret');
      await spy.start();
      const err = (await spy.lookup(AS1).catch((e: unknown) => e)) as Error;
      expect(err.message).toMatch(/http:\/\/127\.0\.0\.1:\d+\/missing\.git/);
      expect(err.message + logged.join('\n')).not.toContain('s3cret');
      expect(logged.join('\n')).toMatch(/refresh failed/);
    } finally {
      await reg.close();
      await spy.close();
    }
  });

  it('never fetched → REGISTRY_UNAVAILABLE naming the cause', async () => {
    server.failing = true;
    const reg = new GitRegistry({ url, cacheDir: path.join(dir, 'cache-empty'), refreshIntervalMs: 0 });
    try {
      await reg.start();
      const err = await reg.lookup(AS1).catch((e: unknown) => e);
      expect(isProblem(err, 'REGISTRY_UNAVAILABLE')).toBe(true);
      expect((err as Error).message).toMatch(/has not been fetched yet/);
    } finally {
      server.failing = false;
      await reg.close();
    }
  });
});
