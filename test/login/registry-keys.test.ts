/**
 * Logins with keys as the DN42 registry holds them (docs/login.md, Which keys count):
 * key-cert armour as gpg reads it, ecdsa nistp384/nistp521, keys that cannot verify skipped with their
 * reason, a key-cert that expired after its owner renewed the key, and the registry URL forms.
 */
import { createServer } from 'node:net';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProblem } from '../../common/errors.ts';
import {
  DirectoryRegistry,
  GitRegistry,
  openRegistry,
  parseUsersFile,
} from '../../controller/auth/login/registry.ts';
import { registryLocation } from '../../controller/auth/login/registry-location.ts';
import {
  buildApp,
  type GpgKey,
  gpgKey,
  gpgRenewedKey,
  gpgSign,
  run,
  type SshKey,
  sshKey,
  sshSign,
  stopGpgAgent,
  tempDir,
  writeRegistry,
} from './support.ts';

const AS_NO_BLANK = 4242420201;
const AS_COMMENT = 4242420202;
const AS_P384 = 4242420203;
const AS_P521 = 4242420204;
const AS_MIXED = 4242420205;
const AS_NONE = 4242420206;
const AS_RENEWED = 4242420207;

let dir: string;
let root: string;
let registry: DirectoryRegistry;
const ssh: Record<'p384' | 'p521' | 'rsa1024' | 'ed', SshKey> = {} as never;
let plain: GpgKey;
let commented: GpgKey;
let weak: GpgKey;
let renewed: { key: GpgKey; stale: string; staleHome: string };

const keyCertId = (k: GpgKey) => `PGPKEY-${k.fingerprint.slice(-8)}`;

/** `fingerpr:` as the registry writes it: ten groups of four, two blanks in the middle. */
function fingerpr(fpr: string): string {
  const groups = fpr.match(/.{4}/g)!;
  return `${groups.slice(0, 5).join(' ')}  ${groups.slice(5).join(' ')}`;
}

/**
 * A key-cert object in the registry's format: padded attributes, one `certif:` per armour line, the
 * blank armour line an empty `certif:`. `headers` go after BEGIN; `blank: false` leaves out the blank
 * line after them, as two key-certs of the DN42 registry do.
 */
async function writeKeyCert(
  id: string,
  armour: string,
  opts: { fpr?: string; headers?: string[]; blank?: boolean; mntner: string },
): Promise<void> {
  const pad = (k: string) => `${k}:`.padEnd(20);
  const [begin, ...rest] = armour.trim().split('\n');
  const body = rest.filter((l) => l.trim() !== '' && !l.includes(': '));
  const armourLines = [begin!, ...(opts.headers ?? []), ...(opts.blank === false ? [] : ['']), ...body];
  const text =
    [
      `${pad('key-cert')}${id}`,
      `${pad('method')}PGP`,
      `${pad('owner')}Test <test@example.test>`,
      ...(opts.fpr ? [`${pad('fingerpr')}${fingerpr(opts.fpr)}`] : []),
      ...armourLines.map((l) => `${pad('certif')}${l}`.trimEnd()),
      `${pad('mnt-by')}${opts.mntner}`,
      `${pad('source')}DN42`,
    ].join('\n') + '\n';
  await writeFile(path.join(root, 'data', 'key-cert', id), text);
  armours[id] = armourLines.join('\n') + '\n';
}

/** The armour each key-cert's certif: lines hold, by key-cert name. */
const armours: Record<string, string> = {};

beforeAll(async () => {
  dir = await tempDir('registry-keys');
  root = path.join(dir, 'registry');
  [ssh.p384, ssh.p521, ssh.rsa1024, ssh.ed] = await Promise.all([
    sshKey(dir, 'ecdsa', 'p384', 384),
    sshKey(dir, 'ecdsa', 'p521', 521),
    sshKey(dir, 'rsa', 'rsa1024', 1024),
    sshKey(dir, 'ed25519', 'ed'),
  ]);
  [plain, commented, weak, renewed] = await Promise.all([
    gpgKey(path.join(dir, 'gnupg-plain'), 'Plain <plain@example.test>'),
    gpgKey(path.join(dir, 'gnupg-commented'), 'Commented <commented@example.test>'),
    gpgKey(path.join(dir, 'gnupg-weak'), 'Weak <weak@example.test>', 'rsa1024'),
    gpgRenewedKey(path.join(dir, 'gnupg-renewed'), 'Renewed <renewed@example.test>'),
  ]);
  await writeRegistry(root, {
    autNums: {
      [AS_NO_BLANK]: ['NOBLANK-MNT'],
      [AS_COMMENT]: ['COMMENT-MNT'],
      [AS_P384]: ['P384-MNT'],
      [AS_P521]: ['P521-MNT'],
      [AS_MIXED]: ['MIXED-MNT'],
      [AS_NONE]: ['NONE-MNT'],
      [AS_RENEWED]: ['RENEWED-MNT'],
    },
    mntners: {
      'NOBLANK-MNT': [keyCertId(plain)],
      'COMMENT-MNT': [keyCertId(commented)],
      'P384-MNT': [ssh.p384.publicLine],
      'P521-MNT': [ssh.p521.publicLine],
      'MIXED-MNT': [ssh.rsa1024.publicLine, keyCertId(weak), 'PGPKEY-0BADC0DE', ssh.ed.publicLine],
      'NONE-MNT': [ssh.rsa1024.publicLine, keyCertId(weak), 'PGPKEY-0BADC0DE', 'x509 CN=old'],
      'RENEWED-MNT': [keyCertId(renewed.key)],
    },
  });
  await writeKeyCert(keyCertId(plain), plain.armoredPublic, { blank: false, mntner: 'NOBLANK-MNT' });
  await writeKeyCert(keyCertId(commented), commented.armoredPublic, {
    headers: ['Version: GnuPG v2', 'Comment: GPGTools - https://gpgtools.org'],
    blank: false,
    fpr: commented.fingerprint,
    mntner: 'COMMENT-MNT',
  });
  await writeKeyCert(keyCertId(weak), weak.armoredPublic, { fpr: weak.fingerprint, mntner: 'NONE-MNT' });
  await writeKeyCert('PGPKEY-0BADC0DE', plain.armoredPublic.replace(/\n[A-Za-z0-9+/]{20}/, '\n!!!!'), {
    mntner: 'NONE-MNT',
  });
  // The registry still holds the key as exported in 2020; it expired at the end of that year.
  await writeKeyCert(keyCertId(renewed.key), renewed.stale, {
    fpr: renewed.key.fingerprint,
    mntner: 'RENEWED-MNT',
  });
  registry = new DirectoryRegistry(root);
});

afterAll(async () => {
  for (const home of [plain, commented, weak, renewed?.key].map((k) => k?.home))
    if (home) await stopGpgAgent(home);
  if (renewed) await stopGpgAgent(renewed.staleHome);
  await rm(dir, { recursive: true, force: true });
});

interface ChallengeAnswer {
  challenge: string;
  methods: Array<Record<string, string>>;
  skipped: Array<{ mntner: string; line: string; reason: string }>;
}

let app: FastifyInstance;
beforeAll(async () => {
  // Refusals are what these tests are about: the limit of failures per address is not.
  app = await buildApp({ registry, failureLimit: { max: 1000 } });
});
afterAll(() => app?.close());

async function challenge(asn: number): Promise<ChallengeAnswer> {
  const res = await app.inject({ method: 'POST', url: '/login', payload: { action: 'challenge', asn } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

function verify(body: Record<string, unknown>) {
  return app.inject({ method: 'POST', url: '/login', payload: { action: 'verify', ...body } });
}

describe('key-cert armour as gpg reads it', () => {
  it.each([
    ['without the blank line after BEGIN', AS_NO_BLANK, () => plain, 'NOBLANK-MNT'],
    ['with Version:/Comment: headers and no blank line', AS_COMMENT, () => commented, 'COMMENT-MNT'],
  ])('%s: gpg reads it, and a login with its key works', async (_, asn, key, mntner) => {
    const k = key();
    expect(armours[keyCertId(k)]).not.toMatch(/BLOCK-----\n\n/);
    expect(await showKeys(armours[keyCertId(k)]!)).toContain(k.fingerprint);

    const c = await challenge(asn);
    expect(c.methods).toEqual([
      { type: 'pgp-key-cert', mntner, keyCert: keyCertId(k), fingerprint: k.fingerprint.toLowerCase() },
    ]);
    expect(c.skipped).toEqual([]);
    const signature = await gpgSign(k, c.challenge, 'detach');
    const res = await verify({ asn, challenge: c.challenge, signature });
    expect(res.statusCode, res.body).toBe(200);
  });
});

/**
 * What `gpg --show-keys` prints for an armour: on a missing blank line it warns and exits 2, yet reads
 * the key, which is what the registry's own tools go by.
 */
async function showKeys(armour: string): Promise<string> {
  const home = path.join(dir, 'gnupg-show');
  await mkdir(home, { recursive: true, mode: 0o700 });
  const file = path.join(dir, 'show.asc');
  await writeFile(file, armour);
  const out = await run('gpg', ['--homedir', home, '--batch', '--with-colons', '--show-keys', file]).catch(
    (err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }),
  );
  return out.stdout.toUpperCase();
}

describe('ssh ecdsa keys on every NIST curve', () => {
  it.each([
    ['ecdsa-sha2-nistp384', AS_P384, 'p384'],
    ['ecdsa-sha2-nistp521', AS_P521, 'p521'],
  ] as const)('%s: listed in the challenge, and its signature logs in', async (type, asn, name) => {
    const c = await challenge(asn);
    expect(c.methods.map((m) => m.type)).toEqual([type]);
    const signature = await sshSign(ssh[name], c.challenge);
    const res = await verify({ asn, challenge: c.challenge, signature });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('a nistp521 key not listed for the ASN is still refused', async () => {
    const c = await challenge(AS_P384);
    const signature = await sshSign(ssh.p521, c.challenge);
    const res = await verify({ asn: AS_P384, challenge: c.challenge, signature });
    expect(res.statusCode).toBe(401);
    expect(res.json().detail).toMatch(/not listed by any maintainer/);
  });
});

describe('keys that cannot verify are skipped, with the reason', () => {
  it('the challenge lists the usable key and each skipped line with why', async () => {
    const c = await challenge(AS_MIXED);
    expect(c.methods).toEqual([
      { type: 'ssh-ed25519', mntner: 'MIXED-MNT', key: ssh.ed.publicLine.split(' ')[1] },
    ]);
    expect(c.skipped).toEqual([
      {
        mntner: 'MIXED-MNT',
        line: expect.stringMatching(/^auth: ssh-rsa AAAA.*…$/),
        reason: 'ssh-rsa key cannot verify signatures: RSA keys under 2048 bits are refused',
      },
      {
        mntner: 'MIXED-MNT',
        line: `auth: ${keyCertId(weak)}`,
        reason: expect.stringMatching(
          new RegExp(
            `^key-cert ${keyCertId(weak)}: its key cannot verify signatures \\(.*RSA keys shorter than 2047 bits`,
          ),
        ),
      },
      {
        mntner: 'MIXED-MNT',
        line: 'auth: PGPKEY-0BADC0DE',
        reason: expect.stringMatching(/^key-cert PGPKEY-0BADC0DE: its key cannot be read \(/),
      },
    ]);
  });

  it('a users file with a key that cannot verify stops the start, naming the line', () => {
    expect(() =>
      parseUsersFile(
        `AS${AS_NONE}: ${ssh.p521.publicLine}\nAS${AS_NONE}: ${ssh.rsa1024.publicLine}\n`,
        'users',
      ),
    ).toThrow('users line 2: ssh-rsa key cannot verify signatures: RSA keys under 2048 bits are refused');
  });

  it('no challenge for an ASN none of whose keys can verify: the error says why for each line', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/login',
      payload: { action: 'challenge', asn: AS_NONE },
    });
    expect(res.statusCode).toBe(401);
    const { code, detail } = res.json();
    expect(code).toBe('AUTH_FAILED');
    expect(detail).toMatch(/^no maintainer of AS4242420206 lists a key peerops can check/);
    expect(detail).toContain('ecdsa-sha2-nistp521');
    expect(detail).toMatch(
      /NONE-MNT auth: ssh-rsa AAAA\S*…: ssh-rsa key cannot verify signatures: RSA keys under 2048 bits/,
    );
    expect(detail).toMatch(/RSA keys shorter than 2047 bits are considered too weak/);
    expect(detail).toMatch(/PGPKEY-0BADC0DE: key-cert PGPKEY-0BADC0DE: its key cannot be read/);
    expect(detail).toMatch(/auth: x509 CN=old: auth method 'x509' is not supported/);
  });
});

describe('a key-cert that expired in the registry after its owner renewed the key', () => {
  it('is offered, marked expired, and says what makes it verify', async () => {
    const c = await challenge(AS_RENEWED);
    expect(c.methods).toEqual([
      {
        type: 'pgp-key-cert',
        mntner: 'RENEWED-MNT',
        keyCert: keyCertId(renewed.key),
        fingerprint: renewed.key.fingerprint.toLowerCase(),
        expired: 'expired on 2020-12-31 in the registry: send your renewed key as publicKey',
      },
    ]);
  });

  it('a signature by the renewed key logs in with the renewed key sent, not without it', async () => {
    const c = await challenge(AS_RENEWED);
    const signature = await gpgSign(renewed.key, c.challenge, 'detach');
    const bare = await verify({ asn: AS_RENEWED, challenge: c.challenge, signature });
    expect(bare.statusCode).toBe(401);
    expect(bare.json().detail).toMatch(
      /expired on 2020-12-31 in the registry; send your renewed key as publicKey\): Primary key is expired/,
    );
    const stale = await verify({
      asn: AS_RENEWED,
      challenge: c.challenge,
      signature,
      publicKey: renewed.stale,
    });
    expect(stale.statusCode).toBe(401);
    const res = await verify({
      asn: AS_RENEWED,
      challenge: c.challenge,
      signature,
      publicKey: renewed.key.armoredPublic,
    });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('cleartext-signed works the same', async () => {
    const c = await challenge(AS_RENEWED);
    const signature = await gpgSign(renewed.key, c.challenge, 'clear');
    const res = await verify({
      asn: AS_RENEWED,
      challenge: c.challenge,
      signature,
      publicKey: renewed.key.armoredPublic,
    });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('a signature dated back to when the old copy was valid is refused', async () => {
    const c = await challenge(AS_RENEWED);
    // The stale key signs with its clock set to 2020, when the registry's copy was valid.
    const signature = await gpgSign({ ...renewed.key, home: renewed.staleHome }, c.challenge, 'detach', [
      '--faked-system-time',
      '20200601T000000',
    ]);
    for (const publicKey of [undefined, renewed.stale, renewed.key.armoredPublic]) {
      const res = await verify({
        asn: AS_RENEWED,
        challenge: c.challenge,
        signature,
        ...(publicKey ? { publicKey } : {}),
      });
      expect(res.statusCode, res.body).toBe(401);
      expect(res.json().detail).toMatch(/made before the challenge was issued \(2020-06-01/);
    }
  });

  it('a private key pasted as publicKey is refused, not used', async () => {
    const c = await challenge(AS_RENEWED);
    const signature = await gpgSign(renewed.key, c.challenge, 'detach');
    const { stdout: secret } = await run('gpg', [
      '--homedir',
      renewed.key.home,
      '--batch',
      '--pinentry-mode',
      'loopback',
      '--passphrase',
      '',
      '--export-secret-keys',
      '--armor',
      renewed.key.fingerprint,
    ]);
    const res = await verify({ asn: AS_RENEWED, challenge: c.challenge, signature, publicKey: secret });
    expect(res.statusCode).toBe(401);
    expect(res.json().detail).toMatch(/publicKey is a private key; send the public key/);
  });

  it('another key sent along with its own signature does not log in', async () => {
    const c = await challenge(AS_RENEWED);
    const signature = await gpgSign(plain, c.challenge, 'detach');
    const res = await verify({
      asn: AS_RENEWED,
      challenge: c.challenge,
      signature,
      publicKey: plain.armoredPublic,
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().detail).toMatch(/does not verify with a listed key/);
  });
});

describe('registry URL forms', () => {
  it('tells the forms apart', () => {
    expect(registryLocation('https://git.dn42.dev/dn42/registry.git')).toMatchObject({ kind: 'http' });
    expect(registryLocation('git@git.dn42.dev:dn42/registry.git')).toMatchObject({
      kind: 'git',
      transport: 'ssh',
    });
    expect(registryLocation('ssh://git@git.dn42.dev:2222/dn42/registry.git')).toMatchObject({
      kind: 'git',
      transport: 'ssh',
    });
    expect(registryLocation('file:///srv/registry.git')).toMatchObject({ kind: 'git', transport: 'file' });
    expect(registryLocation('/srv/dn42-registry')).toEqual({ kind: 'path', path: '/srv/dn42-registry' });
    expect(registryLocation('./users:old')).toEqual({ kind: 'path', path: './users:old' });
  });

  it.each(['ftp://mirror.example.test/registry', 'git://git.example.test/registry.git'])(
    '%s is refused by name',
    async (source) => {
      await expect(openRegistry({ source, cacheDir: path.join(dir, 'cache-refused') })).rejects.toThrow(
        /^PEEROPS_REGISTRY: (ftp|git):\/\/ is not a registry source peerops reads; use an https:\/\//,
      );
    },
  );

  it('file:// of a git repository: mirrored with git, logins read from it', async () => {
    const bare = path.join(dir, 'served.git');
    await run('git', ['init', '-q', '--bare', '-b', 'master', bare]);
    await run('git', ['-C', root, 'init', '-q', '-b', 'master']);
    await run('git', ['-C', root, 'add', '-A']);
    await run('git', ['-C', root, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'r']);
    await run('git', ['-C', root, 'push', '-q', bare, 'master']);
    const reg = await openRegistry({
      source: pathToFileURL(bare).href,
      cacheDir: path.join(dir, 'cache-file'),
      refreshIntervalMs: 0,
    });
    try {
      expect(reg).toBeInstanceOf(GitRegistry);
      const auth = await reg.lookup(AS_NO_BLANK);
      expect(auth?.methods.map((m) => m.type)).toEqual(['pgp-key-cert']);
      expect((await reg.lookup(AS_P521))?.methods.map((m) => m.type)).toEqual(['ecdsa-sha2-nistp521']);
      // A refresh brings what was pushed since (a fetch into the shallow mirror).
      const AS_LATER = 4242420299;
      await writeRegistry(root, { autNums: { [AS_LATER]: ['P384-MNT'] }, mntners: {} });
      await run('git', ['-C', root, 'add', '-A']);
      await run('git', ['-C', root, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'r2']);
      await run('git', ['-C', root, 'push', '-q', bare, 'master']);
      expect(await reg.lookup(AS_LATER)).toBeUndefined();
      expect(await (reg as GitRegistry).refresh()).toBe(true);
      expect((await reg.lookup(AS_LATER))?.methods.map((m) => m.type)).toEqual(['ecdsa-sha2-nistp384']);
    } finally {
      await reg.close();
    }
  });

  it('file:// with its copy in a read-only data dir: logins read the copy fetched last, the start goes on', async () => {
    const bare = path.join(dir, 'served-ro.git');
    const cacheDir = path.join(dir, 'cache-ro');
    await run('git', ['init', '-q', '--bare', '-b', 'master', bare]);
    await run('git', ['-C', root, 'init', '-q', '-b', 'master']);
    await run('git', ['-C', root, 'add', '-A']);
    await run('git', [
      '-C',
      root,
      '-c',
      'user.name=t',
      '-c',
      'user.email=t@t',
      'commit',
      '-q',
      '--allow-empty',
      '-m',
      'r',
    ]);
    await run('git', ['-C', root, 'push', '-q', bare, 'master']);
    const source = pathToFileURL(bare).href;
    await (await openRegistry({ source, cacheDir, refreshIntervalMs: 0 })).close();
    // the data dir read-only, as docs/store.md's "A read-only data directory": a bind mount made read-only
    await run('mount', ['--bind', cacheDir, cacheDir]);
    try {
      await run('mount', ['-o', 'remount,bind,ro', cacheDir]);
      const warned: string[] = [];
      const reg = await openRegistry({
        source,
        cacheDir,
        refreshIntervalMs: 0,
        log: { info: () => {}, warn: (_o, msg) => warned.push(msg) },
      });
      try {
        expect((await reg.lookup(AS_NO_BLANK))?.methods.map((m) => m.type)).toEqual(['pgp-key-cert']);
        expect(warned).toEqual([
          'login registry: the data dir is read-only; logins read the copy fetched last, not refreshed until a restart',
        ]);
      } finally {
        await reg.close();
      }
    } finally {
      await run('umount', [cacheDir]);
    }
  });

  it.each([
    ['a path that does not exist', 'nowhere'],
    ['a directory that is not a git repository', 'registry/data'],
  ])('file:// of %s stops the start with git’s reason', async (_, rel) => {
    const url = pathToFileURL(path.join(dir, rel)).href;
    await expect(
      openRegistry({ source: url, cacheDir: path.join(dir, `cache-${rel.replace('/', '-')}`) }),
    ).rejects.toThrow(
      new RegExp(`^PEEROPS_REGISTRY ${url}: git fetch failed: .*does not appear to be a git repository`),
    );
  });

  it('ssh URLs are fetched with git over ssh; an unreachable host is the refresh’s error, not the start’s', async () => {
    const port = await closedPort();
    for (const source of [`ssh://git@127.0.0.1:${port}/registry.git`, 'git@127.0.0.1:registry.git']) {
      const reg = await openRegistry({
        source,
        cacheDir: path.join(dir, `cache-ssh-${source.length}`),
        refreshIntervalMs: 0,
      });
      try {
        const err = await reg.lookup(AS_NO_BLANK).catch((e: unknown) => e);
        expect(isProblem(err, 'REGISTRY_UNAVAILABLE')).toBe(true);
        expect((err as Error).message).toMatch(/has not been fetched yet: git fetch failed: /);
        if (source.startsWith('ssh:'))
          expect((err as Error).message).toMatch(new RegExp(`port ${port}: Connection refused$`));
      } finally {
        await reg.close();
      }
    }
  });
});

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
