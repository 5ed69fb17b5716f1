/**
 * Which changes wake which agent long polls (docs/api.md, long polls): only a change to a router's
 * sessions as its agent sees them wakes that router's poll; heartbeats with a new mesh key, policies,
 * router specs, BGP states and metrics wake none. Counted with peerops_long_poll_wakeups_total and by
 * whether each poll has answered, not by timing.
 */
import { register } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, driver, expectOk, startHarness, wgKey, type Harness } from './helpers.ts';

let h: Harness;
let base: string;
const tokens = new Map<string, string>();

async function wakeups(): Promise<{ changed: number; unchanged: number }> {
  const metric = register.getSingleMetric('peerops_long_poll_wakeups_total');
  const values = (await metric?.get())?.values ?? [];
  const of = (answer: string) => values.find((v) => v.labels.answer === answer)?.value ?? 0;
  return { changed: of('changed'), unchanged: of('unchanged') };
}

/** A long poll of the router's sessions with its current ETag; `answered` turns true when it returns. */
async function poll(router: string) {
  const headers = { authorization: `Bearer ${tokens.get(router)}` };
  const first = await fetch(`${base}/agent/${router}/sessions`, { headers });
  await first.arrayBuffer();
  const state = { answered: false, status: 0 };
  const cancel = new AbortController();
  const done = fetch(`${base}/agent/${router}/sessions?wait=120`, {
    headers: { ...headers, 'if-none-match': first.headers.get('etag') as string },
    signal: cancel.signal,
  }).then(async (res) => {
    await res.arrayBuffer();
    state.answered = true;
    state.status = res.status;
  });
  return { state, done, cancel };
}

/** Let woken polls run (a wake is answered within a few turns of the event loop), then count. */
async function settle(): Promise<{ changed: number; unchanged: number }> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  return wakeups();
}

beforeAll(async () => {
  h = await startHarness();
  for (const name of ['fra1', 'ams1', 'lon1']) tokens.set(name, await h.addRouter(name));
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
  base = await h.app.listen({ host: '127.0.0.1', port: 0 });
}, 60_000);
afterAll(async () => h?.close());

describe('long poll wake-ups', () => {
  it('wakes only the polls of the router whose sessions the agent sees changed', async () => {
    const fra = driver(h, 'fra1', tokens.get('fra1') as string);
    const ams = driver(h, 'ams1', tokens.get('ams1') as string);
    const active = await fra.inStatus(1);
    const polls = { fra1: await poll('fra1'), ams1: await poll('ams1'), lon1: await poll('lon1') };
    // the requests are held by now: the controller read them before the first wake could come
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const start = await wakeups();
    const nothingWoken = async (what: string) => {
      expect(await settle(), what).toEqual(start);
      for (const [router, p] of Object.entries(polls))
        expect(p.state.answered, `${what}: ${router}`).toBe(false);
    };

    // every router's heartbeat with a new mesh key: the storm of 1,000 agents connecting at once
    for (const [router, token] of tokens)
      await expectOk(
        h.post(`/agent/${router}/heartbeat`, token, { version: '1', uptime: 1, meshPublicKey: wgKey() }),
      );
    await nothingWoken('new mesh keys');
    await expectOk(
      h.post('/admin/policy', h.admin, {
        action: 'set',
        spec: { dn42Asn: ADMIN_ASN, autoUpdate: { enabled: false } },
      }),
    );
    await nothingWoken('a policy change');
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'fra1',
        spec: { displayName: 'Frankfurt' },
      }),
    );
    await nothingWoken('a router spec change');
    const port = h.store.getSession(active)?.spec.listenPort;
    await expectOk(
      h.post('/agent/fra1/modify', tokens.get('fra1') as string, {
        uuid: active,
        status: 1,
        interface: `wg_${port}`,
        bgpState: 'Established',
      }),
    );
    await expectOk(
      h.post('/agent/fra1/report', tokens.get('fra1') as string, {
        sessions: [{ uuid: active, rtt: 1, rxBytes: 1, txBytes: 1, routesImported: 1 }],
      }),
    );
    await nothingWoken('a BGP state and metrics');

    // a pending session on ams1 is not in its agent's answer: its poll wakes, finds the same answer, waits on
    const pendingUuid = await ams.create();
    expect(await settle()).toEqual({ changed: start.changed, unchanged: start.unchanged + 1 });
    expect(polls.ams1.state.answered).toBe(false);

    // its approval changes the answer: ams1's poll answers, the others wait on
    await expectOk(ams.admin('approve', pendingUuid));
    await polls.ams1.done;
    expect(polls.ams1.state.status).toBe(200);
    expect(await settle()).toEqual({ changed: start.changed + 1, unchanged: start.unchanged + 1 });
    expect(polls.fra1.state.answered).toBe(false);
    expect(polls.lon1.state.answered).toBe(false);

    // a user's modify on fra1 answers fra1's poll alone
    await expectOk(fra.user('modify', active, { mtu: 1400 }));
    await polls.fra1.done;
    expect(polls.fra1.state.status).toBe(200);
    expect(await settle()).toEqual({ changed: start.changed + 2, unchanged: start.unchanged + 1 });
    expect(polls.lon1.state.answered).toBe(false);

    // nothing ever concerned lon1: its poll is still held
    polls.lon1.cancel.abort();
    await polls.lon1.done.catch(() => undefined);
    expect(polls.lon1.state.answered).toBe(false);
  });
});
