/**
 * Issue 24: login cannot be denied by strangers. Challenge requests store nothing (challenges.ts), so a
 * flood of them for an ASN, from as many addresses as the flooder likes, does not push out the
 * challenge its owner is signing; the owner's real ssh-keygen signature logs in, once.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../controller/app.ts';
import { checkChallenge, newChallenge } from '../../controller/auth/login/challenges.ts';
import { openRegistry, type Registry } from '../../controller/auth/login/registry.ts';
import { startHarness, type Harness } from '../api/helpers.ts';
import { sshKey, sshSign, type SshKey } from './support.ts';

const OWNER_ASN = 4242421111;

let h: Harness;
let app: FastifyInstance;
let registry: Registry;
let dir: string;
let key: SshKey;

beforeAll(async () => {
  // The controller's documented limits (60 a minute per address), not the harness's generous ones; a
  // body limit that holds 100,000 levels of nesting, so that the depth is what refuses them.
  h = await startHarness({ rateLimit: { perMinute: 60, agentPerMinute: 300 }, bodyLimitBytes: 1024 * 1024 });
  dir = await mkdtemp(join(tmpdir(), 'peerops-flood-'));
  key = await sshKey(dir, 'ed25519', 'owner');
  await writeFile(join(dir, 'users'), `AS${OWNER_ASN}: ${key.publicLine}\n`);
  registry = await openRegistry({ source: join(dir, 'users') });
  app = await buildApp({
    store: h.store,
    tokens: h.tokens,
    config: h.config,
    logger: false,
    login: { registry, serviceHost: 'peerops.test', admins: [] },
  });
});
afterAll(async () => {
  await app?.close();
  await registry?.close();
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const login = (remoteAddress: string, body: Record<string, unknown>, prefix = '') =>
  app.inject({
    method: 'POST',
    url: `${prefix}/login`,
    remoteAddress,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });

/** Challenge requests for the owner's ASN from `addresses` other addresses, `each` from every one. */
async function flood(addresses: number, each: number, base: number): Promise<void> {
  for (let a = 0; a < addresses; a++) {
    const from = `2001:db8:${(base + a).toString(16)}::1`;
    await Promise.all(
      Array.from({ length: each }, async () => {
        const res = await login(from, { action: 'challenge', asn: OWNER_ASN });
        expect(res.statusCode, res.body).toBe(200);
      }),
    );
  }
}

describe('a flood of challenge requests for one ASN', () => {
  it('from 300 other addresses while the owner signs: the owner logs in, the challenge then is used up', async () => {
    const owner = '198.51.100.10';
    const c = await login(owner, { action: 'challenge', asn: OWNER_ASN });
    expect(c.statusCode, c.body).toBe(200);
    const text = c.json().challenge as string;
    // 1,500 challenges for the ASN (five from each address, as often as its limit allows) while the
    // owner's ssh-keygen runs
    const [signature] = await Promise.all([sshSign(key, text), flood(300, 5, 0x100)]);
    await flood(10, 5, 0x1000);

    const verify = { action: 'verify', asn: OWNER_ASN, challenge: text, signature };
    const res = await login(owner, verify);
    expect(res.statusCode, res.body).toBe(200);
    expect(h.tokens.verify(res.json().token)).toMatchObject({ asn: OWNER_ASN, role: 'user' });

    // replay: refused at both prefixes, from the owner's address and from another
    for (const [from, prefix] of [
      [owner, ''],
      ['203.0.113.5', '/api/v1'],
    ] as const) {
      const again = await login(from, verify, prefix);
      expect(again.statusCode).toBe(401);
      expect(again.json()).toMatchObject({
        code: 'AUTH_FAILED',
        detail: expect.stringMatching(/unknown or already used/),
      });
    }
  });

  it('several pending challenges of one ASN all stay good through a flood, each once', async () => {
    const owner = '198.51.100.11';
    const texts: string[] = [];
    for (let i = 0; i < 3; i++)
      texts.push((await login(owner, { action: 'challenge', asn: OWNER_ASN })).json().challenge as string);
    await flood(100, 5, 0x2000);
    const signatures = await Promise.all(texts.map((t) => sshSign(key, t)));
    for (let i = 2; i >= 0; i--) {
      const res = await login(owner, {
        action: 'verify',
        asn: OWNER_ASN,
        challenge: texts[i],
        signature: signatures[i],
      });
      expect(res.statusCode, res.body).toBe(200);
    }
  });

  it("a stranger's verifies with made-up or altered challenges do not touch the owner's", async () => {
    const owner = '198.51.100.12';
    const text = (await login(owner, { action: 'challenge', asn: OWNER_ASN })).json().challenge as string;
    const signature = await sshSign(key, text);
    // a stranger who even saw the text: a changed nonce, a later expiry, the text itself with a bad signature
    const stranger = '203.0.113.66';
    const nonce = /nonce: (\S+)/.exec(text)?.[1] ?? '';
    const forged = text.replace(nonce, `${nonce.slice(0, -2)}AA`);
    const later = text.replace(/expires: .*/, 'expires: 2099-01-01T00:00:00.000Z');
    for (const challenge of [forged, later]) {
      const res = await login(stranger, { action: 'verify', asn: OWNER_ASN, challenge, signature });
      expect(res.json()).toMatchObject({
        code: 'AUTH_FAILED',
        detail: expect.stringMatching(/unknown or was altered/),
      });
    }
    const stolen = await login(stranger, {
      action: 'verify',
      asn: OWNER_ASN,
      challenge: text,
      signature: 'x',
    });
    expect(stolen.json()).toMatchObject({ code: 'AUTH_FAILED', detail: expect.stringMatching(/neither/) });
    // none of that used the challenge up: the owner logs in with it, once
    const ok = await login(owner, { action: 'verify', asn: OWNER_ASN, challenge: text, signature });
    expect(ok.statusCode, ok.body).toBe(200);
    const replay = await login(stranger, { action: 'verify', asn: OWNER_ASN, challenge: text, signature });
    expect(replay.json()).toMatchObject({
      code: 'AUTH_FAILED',
      detail: expect.stringMatching(/already used/),
    });
  });
});

describe('a login body nested too deep', () => {
  it.each([10_000, 100_000])(
    'depth %i: 400 INVALID_REQUEST naming the limit at both prefixes',
    async (depth) => {
      const deep = '['.repeat(depth) + '1' + ']'.repeat(depth);
      for (const prefix of ['', '/api/v1'])
        for (const body of [
          `{"action":"challenge","asn":${deep}}`,
          `{"action":"verify","asn":${OWNER_ASN},"challenge":"x","signature":"y","publicKey":${deep}}`,
          `{"action":${deep}}`,
        ]) {
          const res = await app.inject({
            method: 'POST',
            url: `${prefix}/login`,
            remoteAddress: '198.51.100.99',
            headers: { 'content-type': 'application/json' },
            payload: body,
          });
          expect(res.statusCode, res.body).toBe(400);
          expect(res.json()).toMatchObject({
            code: 'INVALID_REQUEST',
            detail: 'the request body is nested more than 64 levels deep (objects and arrays)',
          });
        }
    },
  );
});

describe('replicas without Redis', () => {
  it('each has its own challenge key: a challenge logs in only where it was handed out, once', async () => {
    const other = await buildApp({
      store: h.store,
      tokens: h.tokens,
      config: h.config,
      logger: false,
      login: { registry, serviceHost: 'peerops.test', admins: [] },
    });
    try {
      const owner = '198.51.100.13';
      const text = (await login(owner, { action: 'challenge', asn: OWNER_ASN })).json().challenge as string;
      const verify = {
        action: 'verify',
        asn: OWNER_ASN,
        challenge: text,
        signature: await sshSign(key, text),
      };
      const there = await other.inject({
        method: 'POST',
        url: '/login',
        remoteAddress: owner,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(verify),
      });
      expect(there.json()).toMatchObject({
        code: 'AUTH_FAILED',
        detail: expect.stringMatching(/not issued by this service/),
      });
      expect((await login(owner, verify)).statusCode).toBe(200);
    } finally {
      await other.close();
    }
  });
});

describe('the challenge MAC', () => {
  const key = Buffer.alloc(32, 7);
  /** The nonce with its first two differing neighbours swapped (equal neighbours would change nothing). */
  const swapFirstDiffering = (nonce: string): string => {
    const i = [...nonce].findIndex((ch, k) => k + 1 < nonce.length && ch !== nonce[k + 1]);
    return `${nonce.slice(0, i)}${nonce[i + 1]}${nonce[i]}${nonce.slice(i + 2)}`;
  };
  it('recognises its own challenges and nothing else: other key, any field changed, another spelling', () => {
    const c = newChallenge(OWNER_ASN, 'peerops.test', Date.now(), key);
    expect(checkChallenge(c.text, key)).toEqual({ ok: true, challenge: c });
    expect(checkChallenge(c.text, Buffer.alloc(32, 8))).toEqual({ ok: false, why: 'forged' });
    for (const altered of [
      c.text.replace(`asn: ${OWNER_ASN}`, 'asn: 4242421112'),
      c.text.replace('host: peerops.test', 'host: peerops.tesu'),
      c.text.replace(
        /expires: (\S+)/,
        (_m, at: string) => `expires: ${new Date(Date.parse(at) + 1).toISOString()}`,
      ),
      c.text.replace(c.nonce, swapFirstDiffering(c.nonce)),
    ])
      expect(checkChallenge(altered, key)).toEqual({ ok: false, why: 'forged' });
    // the same 32 bytes spelled with other dropped bits in the last character
    const last = c.nonce.at(-1) ?? 'A';
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sibling = alphabet[alphabet.indexOf(last) ^ 1] ?? 'A';
    const respelled = c.text.replace(c.nonce, c.nonce.slice(0, -1) + sibling);
    expect(checkChallenge(respelled, key)).toEqual({ ok: false, why: 'altered' });
    expect(checkChallenge(c.text.replace(/\n/g, '\r\n'), key)).toEqual({ ok: false, why: 'altered' });
  });
});
