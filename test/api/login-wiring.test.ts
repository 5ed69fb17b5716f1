/**
 * The /login plugin as buildApp wires it: both prefixes share one challenge store, a login signed with a
 * real ssh-keygen key yields a JWT the session API accepts (role admin for a configured admin ASN), the
 * policy's block list applies, and outcomes land in peerops_login_total.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ajv } from '../../common/validate.ts';
import { buildApp } from '../../controller/app.ts';
import { openRegistry, type Registry } from '../../controller/auth/login/registry.ts';
import type { FastifyInstance } from 'fastify';
import { ADMIN_ASN, expectOk, problem, startHarness, type Harness } from './helpers.ts';

const exec = promisify(execFile);
let h: Harness;
let app: FastifyInstance;
let registry: Registry;
let dir: string;

beforeAll(async () => {
  h = await startHarness();
  dir = await mkdtemp(join(tmpdir(), 'peerops-loginwire-'));
  await exec('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'test', '-f', join(dir, 'key')]);
  const pub = (await readFile(join(dir, 'key.pub'), 'utf8')).trim();
  await writeFile(join(dir, 'users'), `AS${ADMIN_ASN}: ${pub}\nAS4242429999: ${pub}\n`);
  registry = await openRegistry({ source: join(dir, 'users') });
  await expectOk(
    h.post('/admin/policy', h.admin, {
      action: 'set',
      spec: { dn42Asn: ADMIN_ASN, blockedAsns: [4242429999] },
    }),
  );
  app = await buildApp({
    store: h.store,
    tokens: h.tokens,
    config: h.config,
    logger: false,
    login: { registry, serviceHost: 'peerops.test', admins: [ADMIN_ASN] },
  });
});
afterAll(async () => {
  await app?.close();
  await registry?.close();
  await h?.close();
  await rm(dir, { recursive: true, force: true });
});

const post = (url: string, body: unknown, token?: string) =>
  app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    payload: JSON.stringify(body),
  });

describe('/login wired into buildApp', () => {
  it('a challenge from /login, signed with ssh-keygen, verifies at /api/v1/login and the token works', async () => {
    const c = await post('/login', { action: 'challenge', asn: ADMIN_ASN });
    expect(c.statusCode, c.body).toBe(200);
    const challenge = c.json().challenge as string;
    await writeFile(join(dir, 'challenge'), challenge);
    await exec('ssh-keygen', ['-Y', 'sign', '-n', 'peerops', '-f', join(dir, 'key'), join(dir, 'challenge')]);
    const signature = await readFile(join(dir, 'challenge.sig'), 'utf8');
    const v = await post('/api/v1/login', { action: 'verify', asn: ADMIN_ASN, challenge, signature });
    expect(v.statusCode, v.body).toBe(200);
    expect(v.json().role).toBe('admin');
    expect(h.tokens.verify(v.json().token)).toMatchObject({ asn: ADMIN_ASN, role: 'admin' });
    // /openapi.json documents /login, and both answers fit the schemas it gives
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const login = doc.paths['/login'].post;
    expect(Object.keys(login.requestBody.content['application/json'].schema.discriminator.mapping)).toEqual([
      'challenge',
      'verify',
    ]);
    const answer = login.responses['200'].content['application/json'].schema;
    expect(ajv.validate(answer, c.json()), ajv.errorsText()).toBe(true);
    expect(ajv.validate(answer, v.json()), ajv.errorsText()).toBe(true);
    expect((await post('/admin/router', { action: 'list' }, v.json().token)).statusCode).toBe(200);
    const replay = await post('/login', { action: 'verify', asn: ADMIN_ASN, challenge, signature });
    expect(problem(replay)).toMatchObject({ status: 401, code: 'AUTH_FAILED' });
  });
  it("applies the policy's block list and counts outcomes", async () => {
    const res = await post('/login', { action: 'challenge', asn: 4242429999 });
    expect(problem(res)).toMatchObject({ status: 403, code: 'ASN_BLOCKED' });
    const metrics = await app.inject({ url: '/metrics' });
    expect(metrics.body).toMatch(/peerops_login_total\{outcome="success"\} [1-9]/);
    expect(metrics.body).toMatch(/peerops_login_total\{outcome="asn_blocked"\} [1-9]/);
    expect(metrics.body).toMatch(/peerops_login_total\{outcome="auth_failed"\} [1-9]/);
  });
});
