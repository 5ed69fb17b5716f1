/**
 * The session card while the router waits for the peer (docs/user-guide.md, statuses): a peer logs in in
 * a real browser; their approved session, which the router's agent reports configured with BIRD in
 * Connect, reads "The router is ready and waiting for your side" with the peer's checklist and the
 * router's WireGuard public key; once the agent reports it Established, the card says it is up.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, expectOk, sessionFields, USER_ASN } from '../api/helpers.ts';
import { expectAccessible, logInWithSsh, openPage, usePeerPortal } from './support.ts';

const portal = usePeerPortal('portal-waiting', USER_ASN, []);
let agentToken: string;

beforeAll(async () => {
  agentToken = await portal.h.addRouter('fra1', { displayName: 'Frankfurt 1' });
  await expectOk(
    portal.h.post('/admin/policy', portal.h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }),
  );
});

/** The agent's report of the session it configured, with BIRD's state. */
async function agentReports(uuid: string, status: number, bgpState: string): Promise<void> {
  await expectOk(
    portal.h.post('/agent/fra1/modify', agentToken, {
      uuid,
      status,
      interface: `wg_${portal.h.store.getSession(uuid)?.spec.listenPort ?? 0}`,
      bgpState,
      bgpSince: new Date().toISOString(),
    }),
  );
}

describe('portal: the router waits for the peer', () => {
  it("says so with the peer's checklist and the router's public key; then the session is up", async () => {
    const fields = sessionFields('fra1', { endpoint: 'peer.example.org:51820' });
    const created = await expectOk(portal.h.post('/session', portal.h.user, fields));
    const uuid = (created.json() as { uuid: string }).uuid;
    await expectOk(portal.h.post('/admin/session', portal.h.admin, { action: 'approve', uuid }));
    await expectOk(portal.h.post('/agent/fra1/heartbeat', agentToken, { version: '1.0.0', uptime: 1 }));
    await agentReports(uuid, 4, 'Connect');
    const router = portal.h.store.getRouter('fra1');
    const session = portal.h.store.getSession(uuid);
    if (!router || !session) throw new Error('router or session missing');

    const { page, problems } = await openPage(portal.browser, portal.url);
    await page.goto(portal.url);
    await logInWithSsh(page, USER_ASN, portal.key);
    const card = page.locator(`article[data-uuid="${uuid}"]`);
    const words = card.getByTestId('status-words');
    await words.waitFor();
    expect(await words.textContent()).toMatch(
      /^The router is ready and waiting for your side: configure WireGuard and BIRD with the generated files\. Ready since /,
    );
    expect(await words.textContent()).not.toMatch(/agent may be down/);
    expect(await card.getByTestId('server-public-key').textContent()).toBe(router.spec.publicKey);
    const checklist = (await card.locator('.advice li').allTextContents()).join('\n');
    const serverEndpoint = `${router.spec.endpointHost}:${session.spec.listenPort}`;
    expect(checklist).toContain(
      `endpoint ${serverEndpoint} and the router's public key ${router.spec.publicKey}`,
    );
    expect(checklist).toContain(`your interface's own public key is ${fields.publicKey}`);
    expect(checklist).toContain('your endpoint peer.example.org:51820');
    expect(checklist).toContain(`Your tunnel interface carries fe80::1234/64`);
    expect(checklist).toContain(`the router's side is ${router.spec.linkLocal}`);
    expect(checklist).toContain(
      `neighbor ${router.spec.linkLocal} on your tunnel interface as AS${ADMIN_ASN}`,
    );
    expect(checklist).toContain(`UDP port ${session.spec.listenPort}`);
    await expectAccessible(page, 'a session waiting for the peer');

    // BGP comes up: the card says so at its next refresh (10 s)
    await agentReports(uuid, 1, 'Established');
    await card.getByText('Up: the tunnel and BGP are established.').waitFor();
    expect(await card.locator('.advice').count()).toBe(0);
    expect(problems).toEqual([]);
  });
});
