/**
 * `peerops session list` and `show` say who a session waits for (docs/cli.md): an administrator while
 * it is in review (`show`), the router while its agent sets it up, the peer once the agent reports it
 * configured with BIRD trying, nothing once BGP is Established; `show` names the router's public key and
 * link-local for the peer's side, and what the router still runs while a change waits for review.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, driver, expectOk, startHarness, type Harness } from '../api/helpers.ts';
import { runCli } from './run.ts';

let h: Harness;
let url: string;
let home: string;
let token: string;
let d: ReturnType<typeof driver>;

beforeAll(async () => {
  h = await startHarness();
  token = await h.addRouter('fra1');
  d = driver(h, 'fra1', token);
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  home = await mkdtemp(join(tmpdir(), 'peerops-cli-waiting-'));
});
afterAll(async () => {
  await h?.close();
  await rm(home, { recursive: true, force: true });
});

/** The agent's report of a session it configured, with BIRD's state since now. */
const report = (uuid: string, status: number, bgpState: string) =>
  d.reportBgp(uuid, status, bgpState, new Date());

describe('peerops session list/show: waiting', () => {
  it('names the router, then the peer, then nothing once Established', async () => {
    const uuid = await d.create();
    const owner = d.ownerToken(uuid);
    const cli = (...args: string[]) => runCli(args, { url, home, token: owner });
    expect((await cli('session', 'show', uuid)).stdout).toMatch(
      /^waiting for {7}an administrator's review \(approve or reject\)$/m,
    );
    await expectOk(d.admin('approve', uuid));
    await expectOk(h.post('/agent/fra1/heartbeat', token, { version: '1.0.0', uptime: 1 }));

    let list = await cli('session', 'list');
    expect(list.code).toBe(0);
    expect(list.stdout).toContain('QUEUED_FOR_SETUP (waiting for router)');

    await expectOk(report(uuid, 4, 'Connect'));
    list = await cli('session', 'list');
    expect(list.stdout).toContain('QUEUED_FOR_SETUP (waiting for peer)');
    expect(list.stdout).not.toContain('waiting for router');
    const show = await cli('session', 'show', uuid);
    expect(show.code).toBe(0);
    const router = h.store.getRouter('fra1');
    expect(show.stdout).toMatch(
      new RegExp(
        `^waiting for {7}the peer since \\S+Z: the router is ready; configure WireGuard and BGP with the generated files \\(peerops session config ${uuid} --format wg-quick\\|networkd\\|bird\\|frr\\)$`,
        'm',
      ),
    );
    expect(show.stdout).toMatch(
      new RegExp(`^server public key ${router?.spec.publicKey.replace(/[+/]/g, '\\$&')}$`, 'm'),
    );
    expect(show.stdout).toMatch(new RegExp(`^server link-local ${router?.spec.linkLocal}$`, 'm'));
    const json = await cli('session', 'show', uuid, '-o', 'json');
    expect(JSON.parse(json.stdout)).toMatchObject({ waiting: { for: 'peer' } });

    await expectOk(report(uuid, 1, 'Established'));
    list = await cli('session', 'list');
    expect(list.stdout).not.toContain('waiting for');
    expect((await cli('session', 'show', uuid)).stdout).toMatch(/^waiting for {7}-$/m);
  });
});

describe('peerops session show: a change in review', () => {
  it('says what the router still runs, and what was asked', async () => {
    const uuid = await d.inStatus(1);
    const owner = d.ownerToken(uuid);
    const old = h.store.getSession(uuid)?.spec.ipv6 ?? '';
    await expectOk(d.user('modify', uuid, { ipv6: 'fd42:1234:ee::9', mtu: 1400 }));
    const show = await runCli(['session', 'show', uuid], { url, home, token: owner });
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain(
      `on the router     ACTIVE until reviewed; ipv6 ${old} (asked: fd42:1234:ee::9); mtu 1420 (asked: 1400)`,
    );
  });
});
