/**
 * The agent's node conditions keyed like the controller's (docs/agent.md, Upgrade order): the controller
 * takes a heartbeat's BirdRunning with or without its catalogue key and parameters and says in its
 * answer that it stores them; the agent's client reads that answer, from this controller and from an
 * older one, whose answer is `{ok: true}` alone. The older controller is a loopback fastify answering
 * as that version did, since an older build of peerops cannot run here.
 */
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlaneClient } from '../../agent/sync/client.ts';
import { conditionMessage } from '../../common/messages.ts';
import type { Condition } from '../../common/schema.ts';
import { expectOk, startHarness, type Harness } from './helpers.ts';

let h: Harness;
let token: string;
let url: string;

const condition = (type: string): Condition | undefined =>
  h.store.getRouter('key1')?.status.conditions?.find((c) => c.type === type);

const birdDown = (said: { message: string; key?: string; params?: Record<string, string> }) => ({
  type: 'BirdRunning',
  status: 'False',
  reason: 'BirdDown',
  ...said,
  lastTransitionTime: '2026-11-28T00:00:00.000Z',
});

const client = (base: string) =>
  new ControlPlaneClient({
    url: base,
    token,
    router: 'key1',
    requestTimeout: 10,
    maxRetries: 0,
    retryInitialDelay: 100,
    retryMaxDelay: 100,
  });

beforeAll(async () => {
  h = await startHarness();
  token = await h.addRouter('key1');
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => h?.close());

describe("the agent's node conditions with keys", () => {
  const down = conditionMessage('condition.birdDown', {
    socket: '/run/bird/bird.ctl',
    error: 'connect ECONNREFUSED',
  });

  it("an older agent's text alone is stored as it came, and the answer says keys are taken", async () => {
    const res = await expectOk(
      h.post('/agent/key1/heartbeat', token, {
        version: '0.1.0',
        uptime: 5,
        conditions: [birdDown({ message: down.message })],
      }),
    );
    expect(res.json()).toEqual({ ok: true, conditionKeys: true });
    expect(condition('BirdRunning')).toMatchObject({ message: down.message });
    expect(condition('BirdRunning')?.key).toBeUndefined();
    expect(condition('Ready')).toMatchObject({ status: 'False', reason: 'BirdDown', message: down.message });
  });

  it('a keyed condition keeps its key and parameters, and Ready carries them', async () => {
    expect(down.key).toBe('condition.birdDown');
    await expectOk(
      h.post('/agent/key1/heartbeat', token, { version: '0.1.0', uptime: 6, conditions: [birdDown(down)] }),
    );
    expect(condition('BirdRunning')).toMatchObject({
      message: down.message,
      key: down.key,
      params: down.params,
    });
    expect(condition('Ready')).toMatchObject({ reason: 'BirdDown', key: down.key, params: down.params });
  });

  it("the agent's client: keys once this controller answers, none from an older one", async () => {
    expect(await client(url).heartbeat({ version: '0.1.0', uptime: 7 })).toEqual({ conditionKeys: true });
    const older = Fastify();
    older.post('/agent/key1/heartbeat', () => ({ ok: true }));
    try {
      const olderUrl = await older.listen({ host: '127.0.0.1', port: 0 });
      expect(await client(olderUrl).heartbeat({ version: '0.1.0', uptime: 8 })).toEqual({
        conditionKeys: false,
      });
    } finally {
      await older.close();
    }
  });
});
