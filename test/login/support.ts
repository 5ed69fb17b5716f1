/**
 * Helpers for the login tests: real keys from ssh-keygen and gpg, a DN42-format registry fixture,
 * and a fastify app with the login plugin and a problem+json error handler.
 */
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import Fastify, { type FastifyInstance } from 'fastify';
import { installErrorHandling } from '../../controller/api/problem.ts';
import { TokenIssuer } from '../../controller/auth/jwt.ts';
import loginPlugin, { type LoginPluginOptions, type Role } from '../../controller/auth/login/plugin.ts';

export const run = promisify(execFile);

export async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(path.join(tmpdir(), `peerops-login-${prefix}-`));
}

// ---- SSH ----

export type SshAlgo = 'ed25519' | 'rsa' | 'ecdsa';

export interface SshKey {
  path: string;
  /** The public key line: `<type> <base64> <comment>`. */
  publicLine: string;
}

/** `bits`: the ecdsa curve (256, 384, 521) or RSA size; default 256 and 3072. */
export async function sshKey(
  dir: string,
  algo: SshAlgo,
  name: string = algo,
  bits?: number,
): Promise<SshKey> {
  const file = path.join(dir, `id_${name}`);
  const size =
    algo === 'ecdsa' ? ['-b', String(bits ?? 256)] : algo === 'rsa' ? ['-b', String(bits ?? 3072)] : [];
  await run('ssh-keygen', ['-q', '-t', algo, ...size, '-N', '', '-C', `${name}@test`, '-f', file]);
  return { path: file, publicLine: (await readFile(`${file}.pub`, 'utf8')).trim() };
}

/** `ssh-keygen -Y sign` over text, as the CLI does; returns the armored signature. */
export async function sshSign(key: SshKey, text: string, namespace = 'peerops'): Promise<string> {
  const dir = await tempDir('sig');
  try {
    const file = path.join(dir, 'challenge');
    await writeFile(file, text);
    await run('ssh-keygen', ['-Y', 'sign', '-n', namespace, '-f', key.path, file]);
    return await readFile(`${file}.sig`, 'utf8');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

// ---- OpenPGP ----

export interface GpgKey {
  home: string;
  fingerprint: string;
  armoredPublic: string;
}

/** `algo`: gpg's --quick-gen-key algorithm (`rsa1024` for a key too weak to verify). */
export async function gpgKey(home: string, uid: string, algo = 'future-default'): Promise<GpgKey> {
  await mkdir(home, { recursive: true, mode: 0o700 });
  const gpg = (...args: string[]) => run('gpg', ['--homedir', home, '--batch', ...args]);
  await gpg('--passphrase', '', '--quick-gen-key', uid, algo, 'default', 'never');
  const { stdout } = await gpg('--with-colons', '--list-keys', uid);
  const fpr = stdout
    .split('\n')
    .find((l) => l.startsWith('fpr:'))!
    .split(':')[9]!;
  const { stdout: armoredPublic } = await gpg('--export', '--armor', fpr);
  return { home, fingerprint: fpr, armoredPublic };
}

/**
 * A key made in 2020 that expired at the end of 2020 (`stale`: its public key as exported then, what a
 * registry key-cert may still hold), then renewed to never expire (`key`, exported now). `staleHome` is
 * a copy of the home before the renewal, to sign as that key's holder could then.
 */
export async function gpgRenewedKey(
  home: string,
  uid: string,
): Promise<{ key: GpgKey; stale: string; staleHome: string }> {
  await mkdir(home, { recursive: true, mode: 0o700 });
  const gpg = (...args: string[]) =>
    run('gpg', ['--homedir', home, '--batch', '--pinentry-mode', 'loopback', '--passphrase', '', ...args]);
  await gpg('--faked-system-time', '20200101T000000', '--quick-gen-key', uid, 'ed25519', 'sign', '1y');
  const { stdout } = await gpg('--with-colons', '--list-keys', uid);
  const fpr = stdout
    .split('\n')
    .find((l) => l.startsWith('fpr:'))!
    .split(':')[9]!;
  const { stdout: stale } = await gpg('--export', '--armor', fpr);
  await stopGpgAgent(home);
  const staleHome = `${home}-stale`;
  // the agent's sockets (S.gpg-agent…) stay behind: each home starts its own agent
  await cp(home, staleHome, { recursive: true, filter: (src) => !path.basename(src).startsWith('S.') });
  await gpg('--quick-set-expire', fpr, '0');
  const { stdout: armoredPublic } = await gpg('--export', '--armor', fpr);
  return { key: { home, fingerprint: fpr, armoredPublic }, stale, staleHome };
}

/** `extra`: more gpg options, e.g. `--faked-system-time` to date the signature. */
export async function gpgSign(
  key: GpgKey,
  text: string,
  mode: 'detach' | 'clear',
  extra: string[] = [],
): Promise<string> {
  const dir = await tempDir('pgp');
  try {
    const file = path.join(dir, 'challenge');
    await writeFile(file, text);
    const how = mode === 'detach' ? ['--detach-sign', '--armor'] : ['--clearsign'];
    const { stdout } = await run('gpg', [
      '--homedir',
      key.home,
      '--batch',
      '--pinentry-mode',
      'loopback',
      '--passphrase',
      '',
      ...extra,
      '-u',
      key.fingerprint,
      ...how,
      '-o',
      '-',
      file,
    ]);
    return stdout;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function stopGpgAgent(home: string): Promise<void> {
  await run('gpgconf', ['--homedir', home, '--kill', 'gpg-agent']).catch(() => undefined);
}

// ---- a DN42-format registry ----

export interface RegistryFixture {
  /** ASN → maintainers (mnt-by, in order). */
  autNums: Record<number, string[]>;
  /** mntner name → auth lines. */
  mntners: Record<string, string[]>;
  /** PGPKEY-XXXXXXXX → armored public key. */
  keyCerts?: Record<string, string>;
  /** prefix (`fd42:1234::/48`, `172.20.1.0/24`) → its origin ASNs: `route6` / `route` objects. */
  routes?: Record<string, number[]>;
}

/** Writes the objects as the DN42 registry does (padded RPSL, one certif: line per armor line). */
export async function writeRegistry(root: string, fx: RegistryFixture): Promise<void> {
  const pad = (k: string) => `${k}:`.padEnd(20);
  for (const dir of ['aut-num', 'mntner', 'key-cert'])
    await mkdir(path.join(root, 'data', dir), { recursive: true });
  for (const [asn, mnts] of Object.entries(fx.autNums)) {
    const lines = [
      `${pad('aut-num')}AS${asn}`,
      `${pad('as-name')}TEST-AS`,
      ...mnts.map((m) => `${pad('mnt-by')}${m}`),
    ];
    await writeFile(
      path.join(root, 'data', 'aut-num', `AS${asn}`),
      lines.join('\n') + `\n${pad('source')}DN42\n`,
    );
  }
  for (const [name, auths] of Object.entries(fx.mntners)) {
    const lines = [
      `${pad('mntner')}${name}`,
      ...auths.map((a) => `${pad('auth')}${a}`),
      `${pad('mnt-by')}${name}`,
    ];
    await writeFile(path.join(root, 'data', 'mntner', name), lines.join('\n') + `\n${pad('source')}DN42\n`);
  }
  for (const [prefix, origins] of Object.entries(fx.routes ?? {})) {
    // as the registry names them: data/route6/fd42:1234::_48, data/route/172.20.1.0_24
    const type = prefix.includes(':') ? 'route6' : 'route';
    await mkdir(path.join(root, 'data', type), { recursive: true });
    const lines = [`${pad(type)}${prefix}`, ...origins.map((asn) => `${pad('origin')}AS${asn}`)];
    await writeFile(
      path.join(root, 'data', type, prefix.replace('/', '_')),
      lines.join('\n') + `\n${pad('mnt-by')}TEST-MNT\n${pad('source')}DN42\n`,
    );
  }
  for (const [id, armored] of Object.entries(fx.keyCerts ?? {})) {
    const certif = armored
      .trim()
      .split('\n')
      .map((l) => `${pad('certif')}${l}`.trimEnd());
    const lines = [`${pad('key-cert')}${id}`, `${pad('method')}PGP`, ...certif, `${pad('mnt-by')}TEST-MNT`];
    await writeFile(path.join(root, 'data', 'key-cert', id), lines.join('\n') + `\n${pad('source')}DN42\n`);
  }
}

// ---- the app ----

/** The controller's real token issuer, with a fresh key; 12 h as the login task asks. */
export function testIssuer(ttlSeconds = 12 * 3600): {
  tokens: TokenIssuer;
  issue: LoginPluginOptions['issueToken'];
} {
  const pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  const tokens = new TokenIssuer(pem);
  return { tokens, issue: (asn: number, role: Role) => tokens.issueToken(asn, role, ttlSeconds) };
}

export const defaultIssuer = testIssuer();

/** A fastify with the login plugin and the controller's own problem+json error handling. */
export async function buildApp(
  opts: Partial<LoginPluginOptions> & Pick<LoginPluginOptions, 'registry'>,
): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  installErrorHandling(app);
  await app.register(loginPlugin, {
    serviceHost: 'peering.test',
    admins: [],
    isBlocked: () => false,
    issueToken: defaultIssuer.issue,
    ...opts,
  });
  await app.ready();
  return app;
}
