/**
 * The admin list's pages (docs/api.md, Admin API, list): search by ASN prefix and by words, the status
 * filter, each order, offsets that page through without gaps or repeats, the page size bounded, and the
 * whole list without `limit` as the CLI reads it. Real git store, in-process controller.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionStatus } from '../../common/status.ts';
import { expectOk, sessionFields, startHarness, type Harness } from './helpers.ts';

const SESSIONS = 30;
const FIRST_ASN = 4242425000;
let h: Harness;
const uuids: string[] = [];

interface Page {
  sessions: { uuid: string; asn: number; status: number; router: string }[];
  matched?: number;
  total?: number;
}
const list = async (body: Record<string, unknown>): Promise<Page> =>
  (await expectOk(h.post('/admin/session', h.admin, { action: 'list', ...body }))).json();

beforeAll(async () => {
  h = await startHarness();
  await h.addRouter('fra1', { displayName: 'Frankfurt 1' });
  await h.addRouter('ams1', { displayName: 'Amsterdam 1' });
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: 4242420000 } }));
  for (let i = 0; i < SESSIONS; i++) {
    const token = h.tokens.issueToken(FIRST_ASN + i, 'user').token;
    const res = await expectOk(h.post('/session', token, sessionFields(i % 2 ? 'ams1' : 'fra1')));
    uuids.push((res.json() as { uuid: string }).uuid);
  }
  for (const uuid of uuids.slice(0, 5))
    await expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid }));
}, 120_000);
afterAll(() => h?.close());

describe('the admin list in pages', () => {
  it('pages through every session once, in the order asked, and counts them', async () => {
    const seen: number[] = [];
    for (let offset = 0; offset < SESSIONS; offset += 7) {
      const page = await list({ sort: 'asn', descending: true, offset, limit: 7 });
      expect(page).toMatchObject({ matched: SESSIONS, total: SESSIONS });
      seen.push(...page.sessions.map((s) => s.asn));
    }
    expect(seen).toEqual(Array.from({ length: SESSIONS }, (_, i) => FIRST_ASN + SESSIONS - 1 - i));
    // by router display name: Amsterdam before Frankfurt, ASN order within each
    const byRouter = await list({ sort: 'router', offset: 0, limit: 200 });
    expect(byRouter.sessions.map((s) => s.router)).toEqual([
      ...Array<string>(SESSIONS / 2).fill('ams1'),
      ...Array<string>(SESSIONS / 2).fill('fra1'),
    ]);
  });

  it('searches by ASN prefix and by words, filters by status and router', async () => {
    const prefix = await list({ search: `AS${String(FIRST_ASN + 1).slice(0, -1)}`, limit: 50 });
    // 424242500x: ten ASNs
    expect(prefix.matched).toBe(10);
    expect(prefix.sessions.every((s) => String(s.asn).startsWith('424242500'))).toBe(true);
    const words = await list({ search: 'amsterdam', limit: 50 });
    expect(words.matched).toBe(SESSIONS / 2);
    const one = await list({ search: uuids[3]!, limit: 50 });
    expect(one.sessions.map((s) => s.uuid)).toEqual([uuids[3]]);
    const queued = await list({ status: SessionStatus.QUEUED_FOR_SETUP, router: 'fra1', limit: 50 });
    expect(queued).toMatchObject({ matched: 3, total: SESSIONS });
    // an offset past the end: an empty page, the counts still said
    expect(await list({ offset: 1000, limit: 50 })).toEqual({
      sessions: [],
      matched: SESSIONS,
      total: SESSIONS,
    });
  });

  it("the router list counts each router's sessions by status, not listing them", async () => {
    const { routers } = (await expectOk(h.post('/admin/router', h.admin, { action: 'list' }))).json<{
      routers: { name: string; sessionsByStatus: { status: number; count: number }[] }[];
    }>();
    expect(routers.find((r) => r.name === 'fra1')?.sessionsByStatus).toEqual([
      { status: SessionStatus.PENDING_REVIEW, count: SESSIONS / 2 - 3 },
      { status: SessionStatus.QUEUED_FOR_SETUP, count: 3 },
    ]);
  });

  it('without limit answers the whole list as before; a page too big or a bad order names the field', async () => {
    const whole = await list({});
    expect(Object.keys(whole)).toEqual(['sessions']);
    expect(whole.sessions).toHaveLength(SESSIONS);
    for (const [body, pointer] of [
      [{ limit: 201 }, '/limit'],
      [{ limit: 0 }, '/limit'],
      [{ offset: -1, limit: 5 }, '/offset'],
      [{ sort: 'name' }, '/sort'],
      [{ search: '' }, '/search'],
    ] as const) {
      const res = await h.post('/admin/session', h.admin, { action: 'list', ...body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json()).toMatchObject({ code: 'INVALID_REQUEST', errors: [{ pointer }] });
    }
  });
});
