/**
 * `GET /network` (docs/api.md, Network): every router with what its Ready says, for anyone logged in
 * and nobody else: one router whose agent reports, one whose BIRD is down, one whose agent never did.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectOk, problem, startHarness, type Harness } from './helpers.ts';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
  const fra1 = await h.addRouter('fra1');
  const ams1 = await h.addRouter('ams1');
  await h.addRouter('sin1', { acceptingSessions: false });
  await expectOk(h.post('/agent/fra1/heartbeat', fra1, { version: '0.1.0', uptime: 5 }));
  await expectOk(
    h.post('/agent/ams1/heartbeat', ams1, {
      version: '0.1.0',
      uptime: 5,
      conditions: [
        {
          type: 'BirdRunning',
          status: 'False',
          reason: 'BirdDown',
          message: 'BIRD does not answer on /run/bird/bird.ctl',
          lastTransitionTime: '2026-11-28T00:00:00.000Z',
        },
      ],
    }),
  );
});
afterAll(async () => h?.close());

describe('GET /network', () => {
  it("lists every router by name with its Ready's state, for a peer", async () => {
    const res = await expectOk(h.get('/network', h.user));
    const routers = (res.json() as { routers: Record<string, unknown>[] }).routers;
    expect(routers.map((r) => [r['name'], r['state'], r['reason'], r['accepting']])).toEqual([
      ['ams1', 'notReady', 'BirdDown', true],
      ['fra1', 'ready', 'AgentReporting', true],
      ['sin1', 'neverReported', null, false],
    ]);
    expect(routers[1]).toMatchObject({ activeSessions: 0, lastHeartbeat: expect.any(String) });
    expect(routers[2]).toMatchObject({ lastHeartbeat: null });
  });

  it('is refused without a token', async () => {
    expect(problem(await h.get('/network'))).toMatchObject({ status: 401 });
  });
});
