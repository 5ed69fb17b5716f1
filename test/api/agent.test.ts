/** The agent endpoints: per-router tokens, ETag/304, long poll on a listening server, scoped reports. */
import { get } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AgentTokenVerifier,
  agentTokenMatches,
  hashAgentToken,
  newAgentToken,
} from '../../controller/auth/agent-token.ts';
import { ADMIN_ASN, driver, expectOk, problem, startHarness, wgKey, type Harness } from './helpers.ts';

let h: Harness;
let fraToken: string;
let amsToken: string;
let fra: ReturnType<typeof driver>;
let ams: ReturnType<typeof driver>;
let base: string;

beforeAll(async () => {
  h = await startHarness();
  fraToken = await h.addRouter('fra1', { dn42Region: 'eu' });
  amsToken = await h.addRouter('ams1');
  fra = driver(h, 'fra1', fraToken);
  ams = driver(h, 'ams1', amsToken);
  await expectOk(
    h.post('/admin/policy', h.admin, {
      action: 'set',
      spec: { dn42Asn: ADMIN_ASN, rpkiServers: [{ host: 'rpki.example.net', port: 8282 }] },
    }),
  );
  base = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => h?.close());

describe('agent tokens', () => {
  it('are stored only as a sha256 hash', () => {
    expect(h.store.getAgentTokenHash('fra1')).toBe(hashAgentToken(fraToken));
    expect(JSON.stringify(h.store.getRouter('fra1'))).not.toContain(fraToken);
  });
  it('match only the stored hash, in any malformed case no', () => {
    const { token, sha256 } = newAgentToken();
    expect(sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(agentTokenMatches(token, sha256)).toBe(true);
    expect(agentTokenMatches(`${token}x`, sha256)).toBe(false);
    expect(agentTokenMatches(token, undefined)).toBe(false);
    expect(agentTokenMatches(token, sha256.slice(2))).toBe(false);
    expect(agentTokenMatches(token, `zz${sha256.slice(2)}`)).toBe(false);
  });
  it('a matched token is remembered with its hash: other tokens and a changed hash refuse it', () => {
    const first = newAgentToken();
    const second = newAgentToken();
    let stored: string | undefined = first.sha256;
    const verifier = new AgentTokenVerifier((router) => (router === 'r' ? stored : undefined));
    expect(verifier.matches('r', second.token)).toBe(false);
    expect(verifier.matches('r', first.token)).toBe(true);
    expect(verifier.matches('r', first.token)).toBe(true); // the remembered path
    expect(verifier.matches('r', second.token)).toBe(false);
    expect(verifier.matches('r', `${first.token}x`)).toBe(false);
    expect(verifier.matches('r', first.token.slice(1))).toBe(false);
    // Same length, one character changed; then non-ASCII characters of the same length, one of whose
    // encodings fills the buffer exactly: all refused, and the remembered token still matches after them.
    const flipped = first.token.slice(0, -1) + (first.token.endsWith('A') ? 'B' : 'A');
    expect(verifier.matches('r', flipped)).toBe(false);
    expect(verifier.matches('r', `${first.token.slice(0, -1)}é`)).toBe(false);
    expect(verifier.matches('r', `${first.token.slice(0, -2)}éx`)).toBe(false);
    expect(verifier.matches('r', first.token)).toBe(true);
    expect(verifier.matches('other', first.token)).toBe(false); // a router without a stored hash
    stored = second.sha256; // rotated
    expect(verifier.matches('r', first.token)).toBe(false);
    expect(verifier.matches('r', second.token)).toBe(true);
    stored = undefined; // removed
    expect(verifier.matches('r', second.token)).toBe(false);
  });
  it("a router's token opens no other router's GET paths, under both prefixes: 401 with WWW-Authenticate", async () => {
    for (const prefix of ['', '/api/v1'])
      for (const path of ['sessions', 'bird-config', 'mesh', 'config']) {
        const res = await h.get(`${prefix}/agent/ams1/${path}`, fraToken);
        expect(problem(res), `${prefix} ${path}`).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
        expect(res.headers['www-authenticate']).toBe('Bearer');
        expect(res.body).not.toContain('ams1.example.net');
      }
    const hb = await h.post('/agent/ams1/heartbeat', fraToken, { version: '1.0.0', uptime: 1 });
    expect(problem(hb)).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
    expect(h.store.getRouter('ams1')?.status.lastHeartbeat).toBeUndefined();
  });
  it("a router's token on every POST of another router, under both prefixes: 401 with WWW-Authenticate, nothing stored", async () => {
    const uuid = await ams.inStatus(4);
    const port = h.store.getSession(uuid)?.spec.listenPort;
    const before = JSON.stringify([h.store.getSession(uuid), h.store.getRouter('ams1')]);
    const m = { uuid, rtt: 1, rxBytes: 1, txBytes: 1, routesImported: 1 };
    for (const prefix of ['', '/api/v1'])
      for (const [path, body] of [
        ['heartbeat', { version: '1.0.0', uptime: 1, meshPublicKey: wgKey() }],
        ['report', { sessions: [m] }],
        ['modify', { uuid, status: 1, interface: `wg_${port}` }],
        ['mesh/status', { peers: [{ router: 'fra1', reachable: true }] }],
      ] as const) {
        const res = await h.post(`${prefix}/agent/ams1/${path}`, fraToken, body);
        expect(problem(res), `${prefix} ${path}`).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
        expect(res.headers['www-authenticate']).toBe('Bearer');
      }
    expect(JSON.stringify([h.store.getSession(uuid), h.store.getRouter('ams1')])).toBe(before);
  });
  it('the agent POSTs answer under /api/v1 with the same effect', async () => {
    const uuid = await fra.inStatus(4);
    const port = h.store.getSession(uuid)?.spec.listenPort;
    await expectOk(h.post('/api/v1/agent/fra1/heartbeat', fraToken, { version: '9.9.9', uptime: 2 }));
    expect(h.store.getRouter('fra1')?.status.agentVersion).toBe('9.9.9');
    const modified = await expectOk(
      h.post('/api/v1/agent/fra1/modify', fraToken, { uuid, status: 1, interface: `wg_${port}` }),
    );
    expect(modified.json()).toMatchObject({ ok: true, uuid, status: 1, statusName: 'ACTIVE' });
    expect(fra.status(uuid)).toBe(1);
    const m = { uuid, rtt: 3.5, rxBytes: 10, txBytes: 20, routesImported: 2 };
    await expectOk(h.post('/api/v1/agent/fra1/report', fraToken, { sessions: [m] }));
    expect(h.store.getSession(uuid)?.status.metrics).toMatchObject({ rtt: 3.5, routesImported: 2 });
    await expectOk(
      h.post('/api/v1/agent/fra1/mesh/status', fraToken, { peers: [{ router: 'ams1', reachable: false }] }),
    );
    expect(h.store.getRouter('fra1')?.status.meshPeers).toEqual([
      expect.objectContaining({ router: 'ams1', reachable: false }),
    ]);
  });
  it('a wrong token is refused before the body is read: 401 even for a body that is not JSON', async () => {
    const res = await h.app.inject({
      method: 'POST',
      url: '/agent/ams1/heartbeat',
      headers: { authorization: `Bearer ${fraToken}`, 'content-type': 'application/json' },
      payload: '{"version": ',
    });
    expect(problem(res)).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
  });
  it('a user JWT, a missing token and an unknown router are 401 with WWW-Authenticate', async () => {
    for (const [url, token] of [
      ['/agent/fra1/sessions', h.admin],
      ['/agent/fra1/sessions', undefined],
      ['/agent/nowhere/sessions', fraToken],
    ] as const) {
      const res = await h.get(url, token);
      expect(problem(res)).toMatchObject({ status: 401, code: 'INVALID_TOKEN' });
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
  });
  it('rotate-token answers a new token once and the old one stops working', async () => {
    const old = await h.addRouter('rot1');
    // used once first, so the controller remembers it as the router's matching token
    await expectOk(h.get('/agent/rot1/sessions', old));
    const res = await expectOk(h.post('/admin/router', h.admin, { action: 'rotate-token', name: 'rot1' }));
    const fresh = res.json().agentToken as string;
    expect(fresh).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(problem(await h.get('/agent/rot1/sessions', old)).status).toBe(401);
    await expectOk(h.get('/agent/rot1/sessions', fresh));
    expect(problem(await h.get('/agent/rot1/sessions', old)).status).toBe(401);
    const list = await expectOk(h.post('/admin/router', h.admin, { action: 'list' }));
    expect(list.body).not.toContain(fresh);
    expect(list.body).not.toContain('agentTokenSha256');
  });
});

describe('GET /agent/:router/sessions', () => {
  it('lists every session but PENDING_REVIEW, with ETag and 304', async () => {
    const pending = await fra.inStatus(3);
    const queued = await fra.inStatus(4);
    const res = await expectOk(h.get('/agent/fra1/sessions', fraToken));
    const body = res.json();
    const uuids = body.sessions.map((s: { uuid: string }) => s.uuid);
    expect(uuids).toContain(queued);
    expect(uuids).not.toContain(pending);
    expect(body.sessions.find((s: { uuid: string }) => s.uuid === queued)).toMatchObject({
      status: 4,
      statusName: 'QUEUED_FOR_SETUP',
      interface: expect.stringMatching(/^wg_\d+$/),
      mpbgp: true,
      extendedNextHop: true,
      restartGeneration: 0,
    });
    const etag = res.headers.etag as string;
    expect(etag).toBe(`"${body.revision}"`);
    const again = await h.get('/agent/fra1/sessions', fraToken, { 'if-none-match': etag });
    expect(again.statusCode).toBe(304);
    await expectOk(fra.admin('approve', pending));
    const changed = await h.get('/agent/fra1/sessions', fraToken, { 'if-none-match': etag });
    expect(changed.statusCode).toBe(200);
    expect(changed.headers.etag).not.toBe(etag);
  });
  it('is gzipped for clients that accept it, under a weak tag of the same hash', async () => {
    await fra.inStatus(4);
    const plain = await expectOk(h.get('/agent/fra1/sessions', fraToken));
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers.vary).toBe('accept-encoding');
    const zipped = await expectOk(
      h.get('/agent/fra1/sessions', fraToken, { 'accept-encoding': 'gzip, deflate' }),
    );
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.headers.vary).toBe('accept-encoding');
    expect(zipped.headers.etag).toBe(`W/${plain.headers.etag}`);
    expect(gunzipSync(zipped.rawPayload).toString()).toBe(plain.body);
    expect(zipped.rawPayload.length).toBeLessThan(plain.rawPayload.length);
    // gzip refused by q=0, or not offered: the identity body
    for (const accept of ['gzip;q=0, identity', 'br'])
      expect(
        (await h.get('/agent/fra1/sessions', fraToken, { 'accept-encoding': accept })).headers[
          'content-encoding'
        ],
      ).toBeUndefined();
    // Either tag is current for either representation.
    for (const [tag, accept] of [
      [plain.headers.etag, 'gzip'],
      [zipped.headers.etag, 'identity'],
    ])
      expect(
        (
          await h.get('/agent/fra1/sessions', fraToken, {
            'if-none-match': tag as string,
            'accept-encoding': accept as string,
          })
        ).statusCode,
      ).toBe(304);
  });
  it('the four GETs answer under /api/v1 too, with the same bodies', async () => {
    for (const path of ['sessions', 'bird-config', 'mesh', 'config']) {
      const plain = await expectOk(h.get(`/agent/fra1/${path}`, fraToken));
      const v1 = await expectOk(h.get(`/api/v1/agent/fra1/${path}`, fraToken));
      expect(v1.json(), path).toEqual(plain.json());
    }
  });
  it('refuses a bad wait', async () => {
    expect(problem(await h.get('/agent/fra1/sessions?wait=abc', fraToken))).toMatchObject({
      code: 'INVALID_REQUEST',
    });
    expect(problem(await h.get('/agent/fra1/sessions?wait=100000', fraToken))).toMatchObject({
      code: 'INVALID_REQUEST',
    });
  });
  it('long poll: an admin approval wakes a waiting request (real server)', async () => {
    const first = await fetch(`${base}/agent/ams1/sessions`, {
      headers: { authorization: `Bearer ${amsToken}` },
    });
    const etag = first.headers.get('etag') as string;
    const uuid = await ams.inStatus(3);
    // Pending sessions are not the agent's business: the ETag holds.
    const started = Date.now();
    const poll = fetch(`${base}/agent/ams1/sessions?wait=20`, {
      headers: { authorization: `Bearer ${amsToken}`, 'if-none-match': etag },
    });
    await new Promise((r) => setTimeout(r, 300));
    await expectOk(ams.admin('approve', uuid));
    const res = await poll;
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(10_000);
    const body = (await res.json()) as { sessions: { uuid: string }[] };
    expect(body.sessions.map((s) => s.uuid)).toContain(uuid);
  });
  it('long poll: times out with 304 when nothing changes', async () => {
    const first = await fetch(`${base}/agent/ams1/sessions`, {
      headers: { authorization: `Bearer ${amsToken}` },
    });
    const etag = first.headers.get('etag') as string;
    const started = Date.now();
    const res = await fetch(`${base}/agent/ams1/sessions?wait=1`, {
      headers: { authorization: `Bearer ${amsToken}`, 'if-none-match': etag },
    });
    expect(res.status).toBe(304);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });
  it('long poll: a stopping controller answers it at once, 304 with Connection: close', async () => {
    const { buildApp } = await import('../../controller/app.ts');
    const app = await buildApp({ store: h.store, tokens: h.tokens, config: h.config, logger: false });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const headers = { authorization: `Bearer ${amsToken}` };
    const etag = (await fetch(`${url}/agent/ams1/sessions`, { headers })).headers.get('etag') as string;
    // node:http, which shows the Connection header (fetch keeps it to itself)
    const answer = new Promise<{ status: number; connection: string | undefined; ms: number }>(
      (resolve, reject) => {
        const started = Date.now();
        get(
          `${url}/agent/ams1/sessions?wait=30`,
          { headers: { ...headers, 'if-none-match': etag } },
          (res) => {
            res.resume();
            resolve({
              status: res.statusCode ?? 0,
              connection: res.headers.connection,
              ms: Date.now() - started,
            });
          },
        ).on('error', reject);
      },
    );
    await new Promise((r) => setTimeout(r, 300));
    const closing = app.close();
    const res = await answer;
    await closing;
    // the agent asks the next controller at once, on a new connection (a kept one would be cut under it)
    expect(res).toMatchObject({ status: 304, connection: 'close' });
    expect(res.ms).toBeLessThan(5_000);
  });
});

describe('reports', () => {
  it("refuses a status report about another router's session, and applies nothing", async () => {
    const uuid = await ams.inStatus(4);
    const port = h.store.getSession(uuid)?.spec.listenPort;
    const res = await h.post('/agent/fra1/modify', fraToken, { uuid, status: 1, interface: `wg_${port}` });
    expect(problem(res)).toMatchObject({ status: 404, code: 'SESSION_NOT_FOUND' });
    expect(ams.status(uuid)).toBe(4);
  });
  it("refuses a metrics batch naming another router's session, recording none of it", async () => {
    const own = await fra.inStatus(1);
    const foreign = await ams.inStatus(1);
    const m = { rtt: 12.5, rxBytes: 100, txBytes: 200, routesImported: 7 };
    const res = await h.post('/agent/fra1/report', fraToken, {
      sessions: [
        { uuid: own, ...m },
        { uuid: foreign, ...m },
      ],
    });
    expect(problem(res)).toMatchObject({ code: 'SESSION_NOT_FOUND' });
    expect(res.json().errors).toEqual([expect.objectContaining({ pointer: '/sessions/1/uuid' })]);
    expect(h.store.getSession(own)?.status.metrics).toBeUndefined();
    expect(h.store.getSession(foreign)?.status.metrics).toBeUndefined();
    const ok = await expectOk(h.post('/agent/fra1/report', fraToken, { sessions: [{ uuid: own, ...m }] }));
    expect(ok.json()).toMatchObject({ ok: true, recorded: 1 });
    expect(h.store.getSession(own)?.status.metrics).toMatchObject(m);
  });
  it('takes rtt null (the peer did not answer the ping) and keeps it as null', async () => {
    const uuid = await fra.inStatus(1);
    const m = { rtt: null, rxBytes: 0, txBytes: 64, routesImported: 0 };
    await expectOk(h.post('/agent/fra1/report', fraToken, { sessions: [{ uuid, ...m }] }));
    expect(h.store.getSession(uuid)?.status.metrics).toMatchObject(m);
    const res = await h.post('/agent/fra1/report', fraToken, { sessions: [{ uuid, ...m, rtt: 'n/a' }] });
    expect(problem(res)).toMatchObject({ code: 'INVALID_REQUEST' });
  });
  it('refuses a wrong interface name', async () => {
    const uuid = await fra.inStatus(4);
    const res = await h.post('/agent/fra1/modify', fraToken, { uuid, status: 1, interface: 'wg_1' });
    expect(problem(res)).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(fra.status(uuid)).toBe(4);
  });
  it('records heartbeats (last seen, version, uptime, mesh key)', async () => {
    const meshPublicKey = wgKey();
    await expectOk(
      h.post('/agent/fra1/heartbeat', fraToken, { version: '1.2.3', uptime: 3600, meshPublicKey }),
    );
    const status = h.store.getRouter('fra1')?.status;
    expect(status).toMatchObject({ agentVersion: '1.2.3', uptime: 3600, meshPublicKey });
    expect(Date.now() - Date.parse(String(status?.lastHeartbeat))).toBeLessThan(5000);
    const metrics = await h.get('/metrics');
    expect(metrics.body).toMatch(/agent_heartbeat_timestamp\{router="fra1"\} \d{10}/);
  });
  it('records mesh status', async () => {
    await expectOk(
      h.post('/agent/fra1/mesh/status', fraToken, {
        peers: [{ router: 'ams1', lastHandshake: null, rtt: 3.2, rxBytes: 1, txBytes: 2, reachable: true }],
      }),
    );
    expect(h.store.getRouter('fra1')?.status.meshPeers).toHaveLength(1);
  });
});

describe('configuration for the agent', () => {
  it('bird-config and config answer 409 naming dn42Asn while the policy has none', async () => {
    const fresh = await startHarness();
    try {
      const token = await fresh.addRouter('new1');
      for (const path of ['bird-config', 'config']) {
        const res = await fresh.get(`/agent/new1/${path}`, token);
        expect(problem(res), path).toMatchObject({ status: 409, code: 'CONFLICT' });
        expect(problem(res).detail).toMatch(/sets no dn42Asn/);
      }
    } finally {
      await fresh.close();
    }
  });
  it('bird-config merges the policy for the router', async () => {
    const res = await expectOk(h.get('/agent/fra1/bird-config', fraToken));
    expect(res.json()).toMatchObject({
      dn42Asn: ADMIN_ASN,
      rpkiServers: [{ host: 'rpki.example.net', port: 8282 }],
      communities: { region: 41 },
      routerId: h.store.getRouter('fra1')?.spec.loopback.ipv4,
    });
    expect(typeof res.json().dn42Asn).toBe('number');
    expect(res.json().ibgpPeers.map((p: { router: string }) => p.router)).toContain('ams1');
  });
  it('mesh lists routers whose mesh key is known', async () => {
    await expectOk(
      h.post('/agent/ams1/heartbeat', amsToken, { version: '1.2.3', uptime: 1, meshPublicKey: wgKey() }),
    );
    const res = await expectOk(h.get('/agent/fra1/mesh', fraToken));
    const peer = res.json().peers.find((p: { router: string }) => p.router === 'ams1');
    expect(peer).toMatchObject({
      router: 'ams1',
      endpoint: expect.stringMatching(/^ams1\.example\.net:\d+$/),
    });
  });
  it('mesh and bird-config follow every change they show, 304 under their ETag until one', async () => {
    // each asked as the agent asks: with the ETag of its last answer
    const etags = new Map<string, string>();
    const ask = async (path: string) => {
      const last = etags.get(path);
      const res = await h.get(path, fraToken, last ? { 'if-none-match': last } : {});
      if (res.statusCode === 304) {
        expect(res.body).toBe('');
        expect(res.headers.etag).toBe(last);
        return undefined;
      }
      await expectOk(Promise.resolve(res));
      expect(res.headers.etag).toMatch(/^"[\w-]{27}"$/);
      expect(res.headers.etag).not.toBe(last);
      etags.set(path, res.headers.etag as string);
      return res.json();
    };
    const mesh = async () =>
      (await ask('/agent/fra1/mesh')) as
        { peers: { router: string; publicKey: string; endpoint: string }[] } | undefined;
    const birdConfig = () => ask('/agent/fra1/bird-config');
    expect(await mesh()).toBeDefined();
    expect(await birdConfig()).toBeDefined();
    expect(await mesh()).toBeUndefined();
    expect(await birdConfig()).toBeUndefined();
    const key = wgKey();
    await expectOk(
      h.post('/agent/ams1/heartbeat', amsToken, { version: '1.2.3', uptime: 2, meshPublicKey: key }),
    );
    expect((await mesh())?.peers.find((p) => p.router === 'ams1')?.publicKey).toBe(key);
    // a heartbeat that changes nothing shown changes neither answer
    await expectOk(
      h.post('/agent/ams1/heartbeat', amsToken, { version: '1.2.3', uptime: 3, meshPublicKey: key }),
    );
    expect(await mesh()).toBeUndefined();
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'ams1',
        spec: { endpointHost: 'ams1.example.org' },
      }),
    );
    expect((await mesh())?.peers.find((p) => p.router === 'ams1')?.endpoint).toMatch(/^ams1\.example\.org:/);
    const policy = h.store.getPolicy('default')?.spec;
    await expectOk(
      h.post('/admin/policy', h.admin, {
        action: 'set',
        spec: { ...policy, rpkiServers: [{ host: 'rpki2.example.net', port: 8282 }] },
      }),
    );
    expect(((await birdConfig()) as { rpkiServers: unknown }).rpkiServers).toEqual([
      { host: 'rpki2.example.net', port: 8282 },
    ]);
    expect(await birdConfig()).toBeUndefined();
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'ams1',
        spec: { endpointHost: 'ams1.example.net' },
      }),
    );
    await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: policy }));
  });
  it('config carries autoUpdate.enabled, false fleet-wide with AGENT_AUTOUPDATE=false', async () => {
    const on = await expectOk(h.get('/agent/fra1/config', fraToken));
    expect(on.json()).toMatchObject({
      node: { name: 'fra1' },
      asn: ADMIN_ASN,
      autoUpdate: { enabled: true },
    });
    const { buildApp } = await import('../../controller/app.ts');
    const app = await buildApp({
      store: h.store,
      tokens: h.tokens,
      config: { ...h.config, agentAutoUpdate: false },
      logger: false,
    });
    try {
      const off = await app.inject({
        url: '/agent/fra1/config',
        headers: { authorization: `Bearer ${fraToken}` },
      });
      expect(off.json().autoUpdate.enabled).toBe(false);
    } finally {
      await app.close();
    }
  });
});
