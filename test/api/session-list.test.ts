/**
 * The user's session list (`POST /session` action list) is encoded once per revision of what it shows
 * (controller/api/session.ts): every kind of change must show in the next answer, for the ASN it concerns,
 * and leave the other ASN's answer as it was. Each answer is also compared with the records built afresh
 * from the store.
 */
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mergedPolicy } from '../../common/rules/index.ts';
import { SessionRecordTexts } from '../../controller/api/session-records.ts';
import { sessionRecord } from '../../controller/api/views.ts';
import type { Session } from '../../controller/store/store.ts';
import {
  ADMIN_ASN,
  OTHER_ASN,
  USER_ASN,
  expectOk,
  sessionFields,
  startHarness,
  wgKey,
  type Harness,
} from './helpers.ts';

let h: Harness;
let agentToken: string;

interface Listed {
  uuid: string;
  status: number;
  mtu: number;
  bgpState: string | null;
  lastHandshake: string | null;
  routerName: string;
  networkAsn: number | null;
}

async function list(token: string): Promise<Listed[]> {
  return (await expectOk(h.post('/session', token, { action: 'list' }))).json().sessions as Listed[];
}

/** The records the list must hold, built from the store without the cache. */
function fresh(asn: number | undefined): unknown[] {
  return h.store
    .listSessions(asn === undefined ? undefined : { asn })
    .sort(
      (a, b) =>
        (a.spec.createdAt ?? '').localeCompare(b.spec.createdAt ?? '') || a.name.localeCompare(b.name),
    )
    .map((s) =>
      sessionRecord(
        s,
        h.store.getRouter(s.spec.router),
        mergedPolicy(h.store, s.spec.router).dn42Asn ?? null,
        h.store.forgeConflictOf?.(s.spec.uuid),
      ),
    );
}

/** Both users' lists and the admin's, each checked against a fresh build. */
async function lists(): Promise<{ mine: Listed[]; other: Listed[] }> {
  const mine = await list(h.user);
  const other = await list(h.other);
  expect(mine).toEqual(fresh(USER_ASN));
  expect(other).toEqual(fresh(OTHER_ASN));
  expect(await list(h.admin)).toEqual(fresh(undefined));
  return { mine, other };
}

beforeAll(async () => {
  h = await startHarness();
  agentToken = await h.addRouter('fra1');
  await h.addRouter('ams1');
  await expectOk(
    h.post('/admin/policy', h.admin, { action: 'set', name: 'default', spec: { dn42Asn: ADMIN_ASN } }),
  );
}, 60_000);

afterAll(async () => {
  await h?.close();
});

describe('the user session list', () => {
  it('shows every kind of change in the next answer, and only in the lists it concerns', async () => {
    const otherUuid = (await expectOk(h.post('/session', h.other, sessionFields('ams1')))).json()
      .uuid as string;
    let { mine, other } = await lists();
    expect(mine).toEqual([]);
    const otherBefore = other;

    // create
    const uuid = (await expectOk(h.post('/session', h.user, sessionFields('fra1')))).json().uuid as string;
    ({ mine, other } = await lists());
    expect(mine.map((s) => s.uuid)).toEqual([uuid]);
    expect(mine[0]?.status).toBe(3);
    expect(other).toEqual(otherBefore);

    // approve
    await expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid }));
    ({ mine, other } = await lists());
    expect(mine[0]?.status).toBe(4);
    expect(other).toEqual(otherBefore);

    // the agent reports it set up, then its BGP state (a status change the agent's own answer lacks)
    const port = h.store.getSession(uuid)?.spec.listenPort;
    const modify = (body: Record<string, unknown>) =>
      expectOk(h.post('/agent/fra1/modify', agentToken, { uuid, interface: `wg_${port}`, ...body }));
    await modify({ status: 1 });
    expect((await lists()).mine[0]?.status).toBe(1);
    await modify({ status: 1, bgpState: 'Established', bgpSince: new Date().toISOString() });
    ({ mine, other } = await lists());
    expect(mine[0]?.bgpState).toBe('Established');
    expect(other).toEqual(otherBefore);

    // metrics and the last handshake (an observation, no write)
    const lastHandshake = new Date().toISOString();
    await expectOk(
      h.post('/agent/fra1/report', agentToken, {
        sessions: [{ uuid, rtt: 3, rxBytes: 10, txBytes: 20, routesImported: 5, lastHandshake }],
      }),
    );
    ({ mine, other } = await lists());
    expect(mine[0]?.lastHandshake).toBe(lastHandshake);
    expect(other).toEqual(otherBefore);

    // the user's modify
    await expectOk(h.post('/session', h.user, { action: 'modify', uuid, mtu: 1400 }));
    expect((await lists()).mine[0]?.mtu).toBe(1400);

    // a router's spec and the policy are in every list
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'fra1',
        spec: { displayName: 'Frankfurt' },
      }),
    );
    expect((await lists()).mine[0]?.routerName).toBe('Frankfurt');
    await expectOk(
      h.post('/admin/policy', h.admin, { action: 'set', name: 'fra1', spec: { dn42Asn: ADMIN_ASN + 1 } }),
    );
    ({ mine, other } = await lists());
    expect(mine[0]?.networkAsn).toBe(ADMIN_ASN + 1);
    expect(other[0]?.networkAsn).toBe(ADMIN_ASN);

    // a heartbeat with a new mesh key shows nowhere, and the lists stay right
    await expectOk(
      h.post('/agent/fra1/heartbeat', agentToken, { version: '1', uptime: 1, meshPublicKey: wgKey() }),
    );
    await lists();

    // the other ASN's delete leaves this list as it was
    const before = (await lists()).mine;
    await expectOk(h.post('/session', h.other, { action: 'delete', uuid: otherUuid }));
    ({ mine } = await lists());
    expect(mine).toEqual(before);

    // delete: once the agent confirms, the session is gone from the list
    await expectOk(h.post('/session', h.user, { action: 'delete', uuid }));
    expect((await lists()).mine[0]?.status).toBe(5);
    await modify({ status: 0 }); // the agent tore it down: removed
    expect((await lists()).mine).toEqual([]);
  });

  it('answers the same bytes while nothing changed', async () => {
    await expectOk(h.post('/session', h.user, sessionFields('ams1')));
    const first = await expectOk(h.post('/session', h.user, { action: 'list' }));
    const second = await expectOk(h.post('/session', h.user, { action: 'list' }));
    expect(second.body).toBe(first.body);
    expect(second.headers['content-type']).toBe('application/json; charset=utf-8');
    // gzipped for a client that takes it once the answer is sent again, the same content
    const asGzip = () =>
      expectOk(
        h.app.inject({
          method: 'POST',
          url: '/session',
          headers: {
            authorization: `Bearer ${h.user}`,
            'content-type': 'application/json',
            'accept-encoding': 'gzip',
          },
          payload: JSON.stringify({ action: 'list' }),
        }),
      );
    const gzipped = await asGzip();
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gzipped.headers.vary).toContain('accept-encoding');
    expect(gunzipSync(gzipped.rawPayload).toString()).toBe(first.body);
    // a changed list is sent as it is the first time (compressing it would cost more than sending it)
    await expectOk(h.post('/session', h.user, sessionFields('fra1')));
    const changed = await asGzip();
    expect(changed.headers['content-encoding']).toBeUndefined();
    const again = await asGzip();
    expect(again.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(again.rawPayload).toString()).toBe(changed.body);
  });

  it('re-encodes after a report only the sessions it names', async () => {
    const uuid = (await expectOk(h.post('/session', h.other, sessionFields('fra1')))).json().uuid as string;
    const record = (s: Session) =>
      sessionRecord(
        s,
        h.store.getRouter(s.spec.router),
        mergedPolicy(h.store, s.spec.router).dn42Asn ?? null,
        undefined,
      );
    const texts = new SessionRecordTexts(h.store, (s) => JSON.stringify(record(s)));
    // every session in the store: the user's two and the other ASN's one at least
    const all = () => h.store.listSessions().sort((a, b) => a.name.localeCompare(b.name));
    const joined = () => JSON.parse(texts.list(all())) as { sessions: unknown[] };
    const count = all().length;
    expect(count).toBeGreaterThanOrEqual(3);
    expect(joined().sessions).toHaveLength(count);
    expect(texts.encoded).toBe(count);
    await expectOk(
      h.post('/agent/fra1/report', agentToken, {
        sessions: [{ uuid, rtt: 7, rxBytes: 1, txBytes: 2, routesImported: 3 }],
      }),
    );
    // the joined list is the records built afresh, and only the reported one was encoded again
    expect(joined().sessions).toEqual(all().map(record));
    expect(texts.encoded).toBe(count + 1);
    // a router's spec shows in every record: all are encoded again
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'fra1',
        spec: { displayName: 'Frankfurt 1' },
      }),
    );
    expect(joined().sessions).toEqual(all().map(record));
    expect(texts.encoded).toBe(2 * count + 1);
  });
});
