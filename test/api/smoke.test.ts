import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, sessionFields, type Harness } from './helpers.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

describe('smoke', () => {
  it('creates a router and a session', async () => {
    const token = await h.addRouter('fra1');
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const res = await h.post('/session', h.user, sessionFields('fra1'));
    expect(res.statusCode, res.body).toBe(200);
    const list = await h.post('/session', h.user, { action: 'list' });
    expect(list.json().sessions).toHaveLength(1);
    const agent = await h.get('/agent/fra1/sessions', token);
    expect(agent.statusCode, agent.body).toBe(200);
  });
});
