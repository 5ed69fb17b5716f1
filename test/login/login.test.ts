/**
 * Logging in (docs/login.md): challenges, ssh and PGP signatures, registry lookups, limits.
 *
 * Over 500 lines: every way a login is accepted or refused, against one registry fixture.
 */
import { rm } from 'node:fs/promises';
import * as path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { MemoryUsedChallenges } from '../../controller/auth/login/challenges.ts';
import type { LoginOutcome } from '../../controller/auth/login/plugin.ts';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { normalizeText } from '../../controller/auth/login/verify.ts';
import {
  buildApp,
  type GpgKey,
  gpgKey,
  gpgSign,
  defaultIssuer,
  type SshKey,
  sshKey,
  sshSign,
  stopGpgAgent,
  tempDir,
  writeRegistry,
} from './support.ts';

const AS_ED = 4242420001;
const AS_RSA = 4242420002;
const AS_ECDSA = 4242420003;
const AS_PGP_FPR = 4242420004;
const AS_PGP_CERT = 4242420005;
const AS_TWO_MNT = 4242420006;
const AS_NO_KEYS = 4242420007;
const AS_UNKNOWN = 4242429999;

let dir: string;
let registry: DirectoryRegistry;
const ssh: Record<'ed' | 'rsa' | 'ecdsa' | 'stranger' | 'second', SshKey> = {} as never;
let pgpFpr: GpgKey;
let pgpCert: GpgKey;
let certId: string;

beforeAll(async () => {
  dir = await tempDir('plugin');
  [ssh.ed, ssh.rsa, ssh.ecdsa, ssh.stranger, ssh.second] = await Promise.all([
    sshKey(dir, 'ed25519'),
    sshKey(dir, 'rsa'),
    sshKey(dir, 'ecdsa'),
    sshKey(dir, 'ed25519', 'stranger'),
    sshKey(dir, 'ed25519', 'second'),
  ]);
  [pgpFpr, pgpCert] = await Promise.all([
    gpgKey(path.join(dir, 'gnupg-fpr'), 'Fpr User <fpr@example.test>'),
    gpgKey(path.join(dir, 'gnupg-cert'), 'Cert User <cert@example.test>'),
  ]);
  certId = `PGPKEY-${pgpCert.fingerprint.slice(-8)}`;
  await writeRegistry(path.join(dir, 'registry'), {
    autNums: {
      [AS_ED]: ['ED-MNT'],
      [AS_RSA]: ['RSA-MNT'],
      [AS_ECDSA]: ['ECDSA-MNT'],
      [AS_PGP_FPR]: ['FPR-MNT'],
      [AS_PGP_CERT]: ['CERT-MNT'],
      [AS_TWO_MNT]: ['FIRST-MNT', 'SECOND-MNT'],
      [AS_NO_KEYS]: ['OLD-MNT'],
    },
    mntners: {
      'ED-MNT': [ssh.ed.publicLine],
      'RSA-MNT': [ssh.rsa.publicLine],
      'ECDSA-MNT': [ssh.ecdsa.publicLine],
      // Lower case on purpose: fingerprints compare case-insensitively.
      'FPR-MNT': [`pgp-fingerprint ${pgpFpr.fingerprint.toLowerCase()}`],
      'CERT-MNT': [certId, 'crypt $1$unsupported'],
      'FIRST-MNT': [ssh.rsa.publicLine],
      'SECOND-MNT': [ssh.second.publicLine],
      'OLD-MNT': ['crypt $1$only-a-password'],
    },
    keyCerts: { [certId]: pgpCert.armoredPublic },
  });
  registry = new DirectoryRegistry(path.join(dir, 'registry'));
});

afterAll(async () => {
  if (pgpFpr) await stopGpgAgent(pgpFpr.home);
  if (pgpCert) await stopGpgAgent(pgpCert.home);
  await rm(dir, { recursive: true, force: true });
});

interface ChallengeAnswer {
  challenge: string;
  host: string;
  asn: number;
  expiresAt: string;
  namespace: string;
  methods: Array<Record<string, string>>;
  skipped: Array<{ mntner: string; line: string; reason: string }>;
}

async function challenge(app: FastifyInstance, asn: number): Promise<ChallengeAnswer> {
  const res = await app.inject({ method: 'POST', url: '/login', payload: { action: 'challenge', asn } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

function verify(app: FastifyInstance, body: Record<string, unknown>) {
  return app.inject({ method: 'POST', url: '/login', payload: { action: 'verify', ...body } });
}

describe('login: successes', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await buildApp({ registry, admins: [AS_RSA] });
  });
  afterAll(() => app.close());

  it.each([
    ['ssh-ed25519', AS_ED, 'ed'],
    ['ssh-rsa', AS_RSA, 'rsa'],
    ['ecdsa-sha2-nistp256', AS_ECDSA, 'ecdsa'],
  ] as const)('%s key signed with ssh-keygen -Y sign', async (type, asn, key) => {
    const c = await challenge(app, asn);
    expect(c.host).toBe('peering.test');
    expect(c.namespace).toBe('peerops');
    expect(c.methods.map((m) => m.type)).toEqual([type]);
    expect(new Date(c.expiresAt).getTime() - Date.now()).toBeGreaterThan(4 * 60_000);
    const signature = await sshSign(ssh[key], c.challenge);
    const res = await verify(app, { asn, challenge: c.challenge, signature });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.role).toBe(asn === AS_RSA ? 'admin' : 'user');
    expect(defaultIssuer.tokens.verify(body.token)).toMatchObject({ asn, role: body.role });
    // the answer names the token's id, which an admin revokes it by
    expect(body.id).toMatch(new RegExp(`^${asn}\\.[0-9]+\\.[A-Za-z0-9_-]{16}$`));
    // 12 h lifetime by default
    expect(new Date(body.expiresAt).getTime() - Date.now()).toBeGreaterThan(11.9 * 3600_000);
  });

  it('pgp-fingerprint with the pasted key, detached armored signature', async () => {
    const c = await challenge(app, AS_PGP_FPR);
    expect(c.methods).toEqual([
      { type: 'pgp-fingerprint', mntner: 'FPR-MNT', fingerprint: pgpFpr.fingerprint.toLowerCase() },
    ]);
    const signature = await gpgSign(pgpFpr, c.challenge, 'detach');
    const res = await verify(app, {
      asn: AS_PGP_FPR,
      challenge: c.challenge,
      signature,
      publicKey: pgpFpr.armoredPublic,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().role).toBe('user');
  });

  it('pgp-fingerprint with the pasted key, cleartext-signed message', async () => {
    const c = await challenge(app, AS_PGP_FPR);
    const signature = await gpgSign(pgpFpr, c.challenge, 'clear');
    expect(signature).toContain('BEGIN PGP SIGNED MESSAGE');
    const res = await verify(app, {
      asn: AS_PGP_FPR,
      challenge: c.challenge,
      signature,
      publicKey: pgpFpr.armoredPublic,
    });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('compares cleartext as OpenPGP does, in linear time on hostile blanks', () => {
    expect(normalizeText('a \t\r\nb  \n\n\n')).toBe('a\nb');
    expect(normalizeText(`${' '.repeat(10)}x`)).toBe(`${' '.repeat(10)}x`);
    // a regex like /[ \t]+$/gm takes minutes on this; the line scan milliseconds
    expect(normalizeText(`${' '.repeat(1_000_000)}x\n${'\n'.repeat(1_000_000)}`)).toHaveLength(1_000_001);
  });

  it('PGPKEY-… resolved through the key-cert, no key sent', async () => {
    const c = await challenge(app, AS_PGP_CERT);
    expect(c.methods).toEqual([
      {
        type: 'pgp-key-cert',
        mntner: 'CERT-MNT',
        keyCert: certId,
        fingerprint: pgpCert.fingerprint.toLowerCase(),
      },
    ]);
    expect(c.skipped).toEqual([
      {
        mntner: 'CERT-MNT',
        line: 'auth: crypt $1$unsupported',
        reason: "auth method 'crypt' is not supported",
      },
    ]);
    const signature = await gpgSign(pgpCert, c.challenge, 'detach');
    const res = await verify(app, { asn: AS_PGP_CERT, challenge: c.challenge, signature });
    expect(res.statusCode, res.body).toBe(200);
  });

  it('an ASN with two maintainers where only the second holds the key', async () => {
    const c = await challenge(app, AS_TWO_MNT);
    expect(c.methods.map((m) => m.mntner)).toEqual(['FIRST-MNT', 'SECOND-MNT']);
    const signature = await sshSign(ssh.second, c.challenge);
    const res = await verify(app, { asn: AS_TWO_MNT, challenge: c.challenge, signature });
    expect(res.statusCode, res.body).toBe(200);
  });
});

describe('login: refusals', () => {
  let app: FastifyInstance;
  let clock = Date.now();
  const outcomes: LoginOutcome[] = [];
  beforeAll(async () => {
    app = await buildApp({
      registry,
      now: () => clock,
      onOutcome: (o) => outcomes.push(o),
      isBlocked: (asn) => asn === AS_ECDSA,
      failureLimit: { max: 1000 },
    });
  });
  afterAll(() => app.close());

  async function expectAuthFailed(body: Record<string, unknown>, reason: RegExp) {
    const res = await verify(app, body);
    expect(res.statusCode, res.body).toBe(401);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.json()).toMatchObject({ code: 'AUTH_FAILED', status: 401 });
    expect(res.json().detail).toMatch(reason);
  }

  it('a key not listed for the ASN', async () => {
    const c = await challenge(app, AS_ED);
    const signature = await sshSign(ssh.stranger, c.challenge);
    await expectAuthFailed({ asn: AS_ED, challenge: c.challenge, signature }, /not listed/);
  });

  it('a key listed for another ASN only', async () => {
    const c = await challenge(app, AS_ED);
    const signature = await sshSign(ssh.rsa, c.challenge);
    await expectAuthFailed({ asn: AS_ED, challenge: c.challenge, signature }, /not listed/);
  });

  it('a tampered challenge, signed as tampered', async () => {
    const c = await challenge(app, AS_ED);
    const tampered = c.challenge.replace(/expires: .*/, 'expires: 2099-01-01T00:00:00.000Z');
    const signature = await sshSign(ssh.ed, tampered);
    await expectAuthFailed({ asn: AS_ED, challenge: tampered, signature }, /altered/);
  });

  it('a signature over other text than the challenge', async () => {
    const c = await challenge(app, AS_ED);
    const signature = await sshSign(ssh.ed, c.challenge + 'extra');
    await expectAuthFailed({ asn: AS_ED, challenge: c.challenge, signature }, /does not verify/);
  });

  it('a PGP signature over other text than the challenge', async () => {
    const c = await challenge(app, AS_PGP_CERT);
    const signature = await gpgSign(pgpCert, c.challenge.replace('asn:', 'asn: 1'), 'detach');
    await expectAuthFailed({ asn: AS_PGP_CERT, challenge: c.challenge, signature }, /did not match/);
  });

  it('a pasted PGP key whose fingerprint is not listed', async () => {
    const c = await challenge(app, AS_PGP_FPR);
    const signature = await gpgSign(pgpCert, c.challenge, 'detach');
    await expectAuthFailed(
      { asn: AS_PGP_FPR, challenge: c.challenge, signature, publicKey: pgpCert.armoredPublic },
      /no OpenPGP key/,
    );
  });

  it('pgp-fingerprint without the public key says to send it', async () => {
    const c = await challenge(app, AS_PGP_FPR);
    const signature = await gpgSign(pgpFpr, c.challenge, 'detach');
    await expectAuthFailed({ asn: AS_PGP_FPR, challenge: c.challenge, signature }, /publicKey/);
  });

  it('an expired challenge (clock moved past 5 minutes)', async () => {
    const c = await challenge(app, AS_ED);
    const signature = await sshSign(ssh.ed, c.challenge);
    clock += 5 * 60_000 + 1000;
    try {
      await expectAuthFailed({ asn: AS_ED, challenge: c.challenge, signature }, /expired/);
    } finally {
      clock = Date.now();
    }
  });

  it('a replayed challenge', async () => {
    const c = await challenge(app, AS_ED);
    const signature = await sshSign(ssh.ed, c.challenge);
    const first = await verify(app, { asn: AS_ED, challenge: c.challenge, signature });
    expect(first.statusCode, first.body).toBe(200);
    await expectAuthFailed({ asn: AS_ED, challenge: c.challenge, signature }, /unknown or already used/);
  });

  it('two verifications racing on one challenge: exactly one wins', async () => {
    const c = await challenge(app, AS_ED);
    const signature = await sshSign(ssh.ed, c.challenge);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => verify(app, { asn: AS_ED, challenge: c.challenge, signature })),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 401, 401, 401, 401, 401, 401, 401]);
  });

  it('a wrong SSH namespace', async () => {
    const c = await challenge(app, AS_ED);
    const signature = await sshSign(ssh.ed, c.challenge, 'git');
    await expectAuthFailed({ asn: AS_ED, challenge: c.challenge, signature }, /namespace is 'git'/);
  });

  it('a challenge for another ASN', async () => {
    const c = await challenge(app, AS_TWO_MNT);
    const signature = await sshSign(ssh.ed, c.challenge);
    await expectAuthFailed({ asn: AS_ED, challenge: c.challenge, signature }, /issued for AS4242420006/);
  });

  it('a challenge issued for another host name', async () => {
    // Two services sharing one challenge key, so the host binding itself is what refuses.
    const shared = randomBytes(32);
    const here = await buildApp({ registry, serviceHost: 'peering.here.test', challengeKey: shared });
    const there = await buildApp({ registry, serviceHost: 'peering.there.test', challengeKey: shared });
    try {
      const c = await challenge(there, AS_ED);
      expect(c.challenge).toContain('host: peering.there.test');
      const signature = await sshSign(ssh.ed, c.challenge);
      const res = await verify(here, { asn: AS_ED, challenge: c.challenge, signature });
      expect(res.statusCode).toBe(401);
      expect(res.json().detail).toMatch(/issued for host peering.there.test/);
    } finally {
      await here.close();
      await there.close();
    }
  });

  it('a challenge from an unrelated service is unknown here', async () => {
    const other = await buildApp({ registry, serviceHost: 'peering.other.test' });
    try {
      const c = await challenge(other, AS_ED);
      const signature = await sshSign(ssh.ed, c.challenge);
      await expectAuthFailed(
        { asn: AS_ED, challenge: c.challenge, signature },
        /unknown or was altered \(not issued by this service\)/,
      );
    } finally {
      await other.close();
    }
  });

  it('garbage in place of a signature', async () => {
    const c = await challenge(app, AS_ED);
    await expectAuthFailed({ asn: AS_ED, challenge: c.challenge, signature: 'hello' }, /neither/);
  });

  it('unknown ASN → 404 NOT_FOUND', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/login',
      payload: { action: 'challenge', asn: AS_UNKNOWN },
    });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'NOT_FOUND', detail: 'AS4242429999 is not in the registry' });
  });

  it('an ASN whose maintainers list no usable key is told so at the challenge', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/login',
      payload: { action: 'challenge', asn: AS_NO_KEYS },
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('AUTH_FAILED');
    expect(res.json().detail).toMatch(
      /no maintainer of AS4242420007 lists a key .*skipped: OLD-MNT auth: crypt \$1\$only-a-password: auth method 'crypt' is not supported/,
    );
  });

  it('blocked ASN → 403 ASN_BLOCKED', async () => {
    const res = await app.inject({
      method: 'POST',
      url: '/login',
      payload: { action: 'challenge', asn: AS_ECDSA },
    });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('ASN_BLOCKED');
  });

  it('bad requests name the field', async () => {
    const noAction = await app.inject({ method: 'POST', url: '/login', payload: { asn: AS_ED } });
    expect(noAction.statusCode).toBe(400);
    expect(noAction.json().code).toBe('INVALID_ACTION');
    const stringAsn = await app.inject({
      method: 'POST',
      url: '/login',
      payload: { action: 'challenge', asn: String(AS_ED) },
    });
    expect(stringAsn.statusCode).toBe(400);
    expect(stringAsn.json()).toMatchObject({ code: 'INVALID_REQUEST', errors: [{ pointer: '/asn' }] });
    const missing = await verify(app, { asn: AS_ED, challenge: 'x' });
    expect(missing.json()).toMatchObject({ code: 'INVALID_REQUEST', errors: [{ pointer: '/signature' }] });
  });

  it('reports outcomes for the metric', () => {
    for (const o of [
      'challenge_issued',
      'success',
      'auth_failed',
      'unknown_asn',
      'asn_blocked',
      'invalid_request',
    ]) {
      expect(outcomes).toContain(o);
    }
  });
});

describe('login: limits and registry failures', () => {
  it('challenge requests store nothing: a flood for one ASN leaves its pending challenges usable', async () => {
    const used = new MemoryUsedChallenges({ max: 50 });
    const app = await buildApp({ registry, usedChallenges: used });
    const signIn = async (c: { challenge: string }) =>
      (
        await verify(app, {
          asn: AS_ED,
          challenge: c.challenge,
          signature: await sshSign(ssh.ed, c.challenge),
        })
      ).statusCode;
    try {
      const early = await challenge(app, AS_ED);
      const second = await challenge(app, AS_ED);
      for (let i = 0; i < 200; i++) await challenge(app, i % 2 ? AS_ED : AS_RSA);
      expect(used.size).toBe(0);
      // both of this ASN's pending challenges still log in, each once
      expect(await signIn(second)).toBe(200);
      expect(await signIn(early)).toBe(200);
      expect(await signIn(early)).toBe(401);
      expect(used.size).toBe(2);
    } finally {
      await app.close();
    }
  });

  it('a full record of used challenges refuses what it can no longer tell apart, never a replay', async () => {
    let clock = Date.now();
    const used = new MemoryUsedChallenges({ max: 3, now: () => clock });
    const app = await buildApp({ registry, usedChallenges: used, now: () => clock });
    const signed = async () => {
      const c = await challenge(app, AS_ED);
      clock += 1000;
      return { asn: AS_ED, challenge: c.challenge, signature: await sshSign(ssh.ed, c.challenge) };
    };
    try {
      const pending = await signed(); // handed out first, used last
      const first = await signed();
      expect((await verify(app, first)).statusCode).toBe(200);
      for (let i = 0; i < 3; i++) expect((await verify(app, await signed())).statusCode).toBe(200);
      // the record of `first` gave way: it, and what is as old, is refused from now on
      expect(used.size).toBe(3);
      expect((await verify(app, first)).json().detail).toMatch(/unknown or already used/);
      expect((await verify(app, pending)).json().detail).toMatch(/unknown or already used/);
      expect((await verify(app, await signed())).statusCode).toBe(200);
      // records leave as their challenges expire
      clock += 5 * 60_000 + 10_000;
      expect((await verify(app, await signed())).statusCode).toBe(200);
      expect(used.size).toBe(1);
    } finally {
      await app.close();
    }
  });

  it('too many failures from an address → 429 RATE_LIMITED with Retry-After there, not for the ASN elsewhere', async () => {
    const app = await buildApp({ registry, failureLimit: { max: 3, windowMs: 60_000 } });
    const from = (remoteAddress: string, payload: Record<string, unknown>) =>
      app.inject({ method: 'POST', url: '/login', remoteAddress, payload });
    try {
      // someone at 192.0.2.66 spends bad signatures (and bogus challenges) on AS_ED, an admin perhaps
      for (let i = 0; i < 3; i++) {
        const c = (await from('192.0.2.66', { action: 'challenge', asn: AS_ED })).json();
        const bad = await from('192.0.2.66', {
          action: 'verify',
          asn: AS_ED,
          challenge: c.challenge,
          signature: 'x',
        });
        expect(bad.statusCode).toBe(401);
      }
      const res = await from('192.0.2.66', { action: 'challenge', asn: AS_ED });
      expect(res.statusCode).toBe(429);
      expect(res.json().code).toBe('RATE_LIMITED');
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      // that address is limited for any ASN
      expect((await from('192.0.2.66', { action: 'challenge', asn: AS_RSA })).statusCode).toBe(429);
      // the ASN's own maintainer, elsewhere, still logs in
      const c = (await from('198.51.100.9', { action: 'challenge', asn: AS_ED })).json();
      const ok = await from('198.51.100.9', {
        action: 'verify',
        asn: AS_ED,
        challenge: c.challenge,
        signature: await sshSign(ssh.ed, c.challenge),
      });
      expect(ok.statusCode, ok.body).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('registry unavailable → 503 REGISTRY_UNAVAILABLE', async () => {
    const outcomes: string[] = [];
    const app = await buildApp({
      registry: new DirectoryRegistry(path.join(dir, 'no-such-registry')),
      onOutcome: (o) => outcomes.push(o),
    });
    try {
      const res = await app.inject({
        method: 'POST',
        url: '/login',
        payload: { action: 'challenge', asn: AS_ED },
      });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ code: 'REGISTRY_UNAVAILABLE' });
      expect(res.json().detail).toMatch(/no-such-registry/);
      expect(outcomes).toEqual(['registry_unavailable']);
    } finally {
      await app.close();
    }
  });
});
