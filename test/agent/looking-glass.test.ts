/**
 * The looking glass end to end (docs/api.md, Looking glass): the real controller hands queries to the
 * real agent over its long poll; the agent runs ping, traceroute and BIRD commands in the node namespace
 * (real BIRD, wireguard-go) towards a peer namespace with its own BIRD; answers through the API and the
 * CLI; refusals; a hung and a huge command cut at their bounds.
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Agent } from '../../agent/agent.ts';
import { runBounded } from '../../agent/looking-glass/bounded.ts';
import type { LgAnswer } from '../../common/looking-glass.ts';
import { problem } from '../api/helpers.ts';
import { runCli } from '../cli/run.ts';
import { waitFor } from '../support/netns.ts';
import { startAgentLab, type AgentLab, type Peer } from './lab.ts';

let L: AgentLab;
let agent: Agent;
let peer: Peer;
let other: Peer;
let uuid: string;
let otherUuid: string;
let address: string;
let home: string;

const lg = (token: string, body: Record<string, unknown>) => L.h.post('/lg', token, body);
const answer = async (token: string, body: Record<string, unknown>): Promise<LgAnswer> => {
  const res = await lg(token, body);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as LgAnswer;
};

beforeAll(async () => {
  L = await startAgentLab('alg');
  home = await mkdtemp(join(tmpdir(), 'peerops-lg-'));
  peer = await L.addPeer('peer', 'fe80::1234');
  other = await L.addPeer('other', 'fe80::5678');
  uuid = await L.approvedSession(peer);
  otherUuid = await L.approvedSession(other);
  agent = L.agent();
  agent.start();
  const port = L.h.store.getSession(uuid)!.spec.listenPort;
  await L.connectPeer(peer, port);
  const otherPort = L.h.store.getSession(otherUuid)!.spec.listenPort;
  await L.connectPeer(other, otherPort);
  // the peer's DN42 address (the session's ipv6) on its side of the tunnel, for ping and traceroute
  address = L.h.store.getSession(uuid)!.spec.ipv6;
  await peer.ns.run('ip', ['addr', 'add', `${address}/128`, 'dev', peer.iface]);
  await waitFor(
    "both peers' routes in",
    async () => {
      const [p] = await agent.bird.protocols(`dn42_${port}`);
      const [o] = await agent.bird.protocols(`dn42_${otherPort}`);
      return p?.routesImported === 1 && o?.routesImported === 1;
    },
    45_000,
    500,
  );
  // The kernel refuses BIRD's routes here: they carry the router's loopback as preferred source, an
  // address the lab's node does not have. A router has it; the lab adds the route itself.
  await L.node.run('ip', ['-6', 'route', 'replace', `${address}/128`, 'dev', `wg_${port}`]);
}, 120_000);
afterAll(async () => {
  await agent?.close();
  await L?.close();
});

describe('looking glass through the agent', () => {
  it('pings and traces a peer address from the router (API)', async () => {
    const t0 = Date.now();
    const ping = await answer(peer.userToken, { op: 'ping', router: L.router, target: address });
    expect(ping.output).toMatch(/4 packets transmitted, 4 received/);
    expect(ping).toMatchObject({ exitCode: 0, truncated: false, timedOut: false });
    console.log(`ping round trip through the agent: ${Date.now() - t0} ms`);
    const trace = await answer(peer.userToken, { op: 'traceroute', router: L.router, target: address });
    expect(trace.output).toContain(address);
    expect(trace.timedOut).toBe(false);
  });

  it("shows the session's protocol, the routes received and exported, and show route for", async () => {
    const protocol = await answer(peer.userToken, { op: 'protocol', session: uuid });
    expect(protocol.output).toMatch(/BGP state:\s+Established/);
    const prefix = `${address.replace(/::1$/, '')}::/48`;
    const received = await answer(peer.userToken, { op: 'routes', session: uuid, direction: 'received' });
    expect(received.output).toContain(prefix);
    expect(received.page).toEqual({ offset: 0, limit: 100, total: 1 });
    const exported = await answer(peer.userToken, { op: 'routes', session: uuid, direction: 'exported' });
    // the other peer's route, not its own
    const otherPrefix = `${L.h.store.getSession(otherUuid)!.spec.ipv6.replace(/::1$/, '')}::/48`;
    expect(exported.output).toContain(otherPrefix);
    expect(exported.output).not.toContain(prefix);
    const t0 = performance.now();
    const route = await answer(peer.userToken, {
      op: 'route',
      router: L.router,
      target: address,
      session: uuid,
    });
    expect(route.output).toContain(prefix);
    console.log(`show route for, round trip through the agent: ${(performance.now() - t0).toFixed(1)} ms`);
  });

  it('gives each route received and exported its filter verdict and ROA state', async () => {
    const port = L.h.store.getSession(uuid)!.spec.listenPort;
    const own = `fd42:${(peer.asn % 10000).toString(16)}::/48`;
    // the peer also sends a prefix outside DN42 (the import filter rejects it, no ROA covers it) and one
    // whose ROA names another AS (rejected as ROA invalid)
    const foreign = '2001:db8:42::/48';
    const hijack = 'fd42:beef::/48';
    const peerConf = await readFile(peer.bird.configPath, 'utf8');
    await writeFile(
      peer.bird.configPath,
      peerConf.replace(
        'unreachable; }',
        `unreachable; route ${foreign} unreachable; route ${hijack} unreachable; }`,
      ),
    );
    // ROAs as the RPKI protocol would load them: the peer's own prefix for its AS, the other for another
    await writeFile(
      join(L.root, 'bird', 'local.d', 'roa.conf'),
      `protocol static lab_roas { roa6 { table dn42_roa6; };
  route fd42:${(peer.asn % 10000).toString(16)}::/32 max 48 as ${peer.asn};
  route fd42:beef::/32 max 48 as 4242420001;
}\n`,
    );
    await L.bird.birdc('configure');
    await peer.bird.birdc('configure');
    const received = await waitFor(
      'the three routes in the page',
      async () => {
        const a = await answer(peer.userToken, { op: 'routes', session: uuid, direction: 'received' });
        return a.routes?.length === 3 ? a : undefined;
      },
      30_000,
      300,
    );
    expect(received.routes).toEqual([
      { net: own, verdict: 'accepted', roa: 'valid' },
      ...[
        { net: foreign, verdict: 'rejected', roa: 'unknown' },
        { net: hijack, verdict: 'rejected', roa: 'invalid' },
      ].sort((a, b) => (received.output.indexOf(a.net) < received.output.indexOf(b.net) ? -1 : 1)),
    ]);
    expect(received.page).toEqual({ offset: 0, limit: 100, total: 3 });
    for (const r of received.routes ?? []) expect(received.output).toContain(r.net);
    // a rejected route is kept aside: neither used nor sent on to the other peer
    const exported = await answer(other.userToken, {
      op: 'routes',
      session: otherUuid,
      direction: 'exported',
    });
    expect(exported.routes?.filter((r) => r.verdict === 'accepted')).toEqual([
      { net: own, verdict: 'accepted', roa: 'valid' },
    ]);
    expect(exported.output).not.toContain(foreign);
    expect(exported.output).not.toContain(hijack);
    const [p] = await agent.bird.protocols(`dn42_${port}`);
    expect(p?.routesImported).toBe(1);
  });

  it('answers through the CLI: lg ping, lg route, session routes, session protocol', async () => {
    const cli = (args: string[]) => runCli(args, { url: L.url, home, token: peer.userToken });
    const ping = await cli(['lg', 'ping', L.router, address]);
    expect(ping.code, `${ping.stdout}${ping.stderr}`).toBe(0);
    expect(ping.stdout).toMatch(/4 received/);
    const trace = await cli(['lg', 'trace', L.router, address]);
    expect(trace.stdout).toContain(address);
    const route = await cli(['lg', 'route', L.router, address]);
    expect(route.stdout).toMatch(/\/48/);
    const routes = await cli(['session', 'routes', uuid, '--received', '--page-size', '1']);
    expect(routes.code, routes.stderr).toBe(0);
    // the page's first route, its verdict and ROA state (the three routes of the test above)
    expect(routes.stdout).toMatch(/routes 1-1 of 3/);
    expect(routes.stdout).toMatch(/^accepted\s+ROA valid\s+fd42:/m);
    const protocol = await cli(['session', 'protocol', uuid]);
    expect(protocol.stdout).toMatch(/BGP state:\s+Established/);
    const outside = await cli(['lg', 'ping', L.router, '8.8.8.8']);
    expect(outside.code).toBe(1);
    expect(outside.stderr).toMatch(/^INVALID_REQUEST: \/target: 8\.8\.8\.8 is outside DN42's ranges/);
  }, 60_000);

  it("refuses a peer another peer's session and addresses outside DN42's ranges", async () => {
    for (const body of [
      { op: 'protocol', session: otherUuid },
      { op: 'routes', session: otherUuid, direction: 'received' },
      { op: 'route', router: L.router, target: address, session: otherUuid },
    ]) {
      const res = await lg(peer.userToken, body);
      expect(problem(res)).toMatchObject({ status: 404, code: 'SESSION_NOT_FOUND' });
    }
    for (const target of ['8.8.8.8', '2001:4860:4860::8888', '::1', '127.0.0.1', 'fd00::/8']) {
      const res = await lg(peer.userToken, { op: 'ping', router: L.router, target });
      expect(problem(res), target).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
      expect((res.json() as { errors: { pointer: string }[] }).errors[0]?.pointer).toBe('/target');
    }
    // bad bodies name the field, never a 5xx
    const bad = await lg(peer.userToken, { op: 'ping', router: L.router, target: 'fd42::1; reboot' });
    expect(problem(bad).status).toBe(400);
    // an admin may ask about the other session
    const admin = await answer(L.h.admin, { op: 'protocol', session: otherUuid });
    expect(admin.output).toContain('dn42_');
  });

  it('cuts a hung command at its time bound and a huge one at its output bound', async () => {
    const t0 = Date.now();
    const hung = await runBounded('sleep', ['30'], { timeMs: 500, outputBytes: 1024 });
    expect(hung).toMatchObject({ timedOut: true, truncated: false });
    expect(Date.now() - t0).toBeLessThan(3000);
    const huge = await runBounded('yes', ['looking glass'], { timeMs: 5000, outputBytes: 64 * 1024 });
    expect(huge).toMatchObject({ truncated: true, timedOut: false });
    expect(Buffer.byteLength(huge.output)).toBe(64 * 1024);
  });
});
