/**
 * `GET /session/events` (docs/api.md, Live updates): the caller's list as server-sent events over a real
 * listening controller and Node's fetch, read with the parser the portal and the CLI use. What an agent
 * reports reaches the session's owner at once; nobody else's stream moves; a revoked token's stream ends.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverEvents, type ServerEvent } from '../../common/event-stream.ts';
import { MAX_STREAMS_PER_ASN } from '../../controller/api/session-events.ts';
import { driver, expectOk, OTHER_ASN, startHarness, USER_ASN, type Harness } from './helpers.ts';

interface Watcher {
  status: number;
  events: (ServerEvent & { at: number })[];
  /** Resolves once the server ended the stream. */
  ended: Promise<void>;
  /** The first event after the `seen`th that `match` takes, waiting up to `ms`. */
  next(seen: number, match: (e: ServerEvent) => boolean, ms?: number): Promise<ServerEvent & { at: number }>;
}

let h: Harness;
let base: string;
let d: ReturnType<typeof driver>;
let agentToken: string;

async function watch(token: string | undefined, prefix = '/api/v1'): Promise<Watcher> {
  const res = await fetch(`${base}${prefix}/session/events`, {
    headers: { accept: 'text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}) },
  });
  const events: Watcher['events'] = [];
  const ended = (async () => {
    if (!res.ok || !res.body) return;
    for await (const e of serverEvents(res.body)) events.push({ ...e, at: performance.now() });
  })();
  const w: Watcher = {
    status: res.status,
    events,
    ended,
    async next(seen, match, ms = 5000) {
      const deadline = performance.now() + ms;
      for (;;) {
        const found = events.slice(seen).find(match);
        if (found) return found;
        if (performance.now() > deadline) throw new Error(`no matching event within ${ms} ms`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
  };
  if (!res.ok) await res.body?.cancel();
  return w;
}

const sessionsOf = (e: ServerEvent) =>
  (JSON.parse(e.data) as { sessions: { uuid: string; status: number; bgpState: string | null }[] }).sessions;
const isList = (e: ServerEvent) => e.event === 'sessions';

beforeAll(async () => {
  h = await startHarness();
  await h.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(h.app.server.address() as AddressInfo).port}`;
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: 4242420000 } }));
  agentToken = await h.addRouter('fra1');
  d = driver(h, 'fra1', agentToken);
});

// the server ends the streams as it closes, as it does for every client when a controller stops
afterAll(() => h.close());

describe('GET /session/events', () => {
  it("sends the owner the agent's report within a second; another ASN's stream stays quiet", async () => {
    const uuid = await d.create(h.user);
    await expectOk(d.admin('approve', uuid));
    const owner = await watch(h.user);
    const other = await watch(h.other);
    const admin = await watch(h.admin, '');
    expect([owner.status, other.status, admin.status]).toEqual([200, 200, 200]);
    // each stream opens with the list as `POST /session` list answers it
    const first = await owner.next(0, isList);
    expect(JSON.parse(first.data)).toEqual(
      (await expectOk(h.post('/session', h.user, { action: 'list' }))).json(),
    );
    expect(sessionsOf(await other.next(0, isList))).toEqual([]);
    expect(sessionsOf(await admin.next(0, isList)).map((s) => s.uuid)).toContain(uuid);
    const [ownerSeen, otherSeen, adminSeen] = [owner.events.length, other.events.length, admin.events.length];

    const sent = performance.now();
    await expectOk(d.reportBgp(uuid, 1, 'Established'));
    const established = (e: ServerEvent) =>
      isList(e) &&
      sessionsOf(e).some((s) => s.uuid === uuid && s.status === 1 && s.bgpState === 'Established');
    const seen = await owner.next(ownerSeen, established, 1000);
    expect(seen.at - sent).toBeLessThan(1000);
    await admin.next(adminSeen, established, 1000);
    // nothing of AS4242421234 reaches AS4242425678, not even an empty repeat of its list
    await new Promise((r) => setTimeout(r, 300));
    expect(other.events.slice(otherSeen)).toEqual([]);
  });

  it("ends a revoked token's stream with an end event, and refuses it again", async () => {
    const { token } = h.tokens.issueToken(USER_ASN, 'user');
    const w = await watch(token);
    await w.next(0, isList);
    const revoked = performance.now();
    await expectOk(h.post('/token', token, { action: 'revoke' }));
    const end = await w.next(0, (e) => e.event === 'end', 3000);
    expect(JSON.parse(end.data)).toEqual({
      code: 'INVALID_TOKEN',
      detail: 'the token was revoked; log in again',
      key: 'auth.tokenRevoked',
      params: {},
    });
    expect(end.at - revoked).toBeLessThan(2000);
    await w.ended;
    expect((await watch(token)).status).toBe(401);
  });

  it('keeps a quiet stream open with a comment line every 15 s', async () => {
    const res = await fetch(`${base}/session/events`, {
      headers: { authorization: `Bearer ${h.tokens.issueToken(OTHER_ASN + 2, 'user').token}` },
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    const opened = performance.now();
    let text = '';
    while (!text.includes(': keep-alive\n\n')) text += decoder.decode((await reader.read()).value);
    expect(performance.now() - opened).toBeGreaterThan(14_000);
    expect(text).toBe('retry: 3000\n\nevent: sessions\ndata: {"sessions":[]}\n\n: keep-alive\n\n');
    await reader.cancel();
  }, 30_000);

  it('refuses a caller without a token, and an ASN past its stream limit with RATE_LIMITED', async () => {
    expect((await watch(undefined)).status).toBe(401);
    const asn = OTHER_ASN + 1;
    const tokens = Array.from({ length: MAX_STREAMS_PER_ASN }, () => h.tokens.issueToken(asn, 'user').token);
    const open: Watcher[] = [];
    for (const token of tokens) open.push(await watch(token));
    expect(open.map((w) => w.status)).toEqual(open.map(() => 200));
    const refused = await fetch(`${base}/session/events`, {
      headers: { authorization: `Bearer ${h.tokens.issueToken(asn, 'user').token}` },
    });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ code: 'RATE_LIMITED' });
    // a stream that ended frees its place
    await expectOk(h.post('/token', tokens[0], { action: 'revoke' }));
    await open[0]?.ended;
    let again: Watcher | undefined;
    for (let tries = 0; tries < 50 && again?.status !== 200; tries++) {
      again = await watch(h.tokens.issueToken(asn, 'user').token);
      if (again.status !== 200) await new Promise((r) => setTimeout(r, 20));
    }
    expect(again?.status).toBe(200);
  });
});
