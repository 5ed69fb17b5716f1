/**
 * The agent as it runs on a router (`peerops agent` inside the node's namespace, real BIRD and
 * wireguard-go) with endpoint names resolved by the system's resolver from a hosts file
 * (docs/agent.md, endpoint resolution): a name that resolves to 127.0.0.1 never reaches WireGuard and its session is 6 with the
 * reason, while a name resolving to the peer's address reaches WireGuard as that address.
 *
 * The hosts file is the namespace's own: `ip netns exec` mounts /etc/netns/<namespace>/hosts over
 * /etc/hosts for the agent alone, so the machine's /etc/hosts, shared with every other test, is not
 * touched. The agent reaches the controller through a relay: a unix socket in this process and a TCP
 * forwarder to it inside the namespace.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { createConnection, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectOk } from '../api/helpers.ts';
import { waitFor } from '../support/netns.ts';
import { startAgentLab, wgKeyPair, type AgentLab, type AgentProcess, type Peer } from './lab.ts';

let L: AgentLab;
let peer: Peer;
let relay: Server;
let agent: AgentProcess | undefined;
let netnsEtc: string;
const FORWARD_PORT = 8080;

beforeAll(async () => {
  L = await startAgentLab('agn');
  peer = await L.addPeer('pa', 'fe80::a');
  const peerAddress = /^\[([^\]]+)\]/.exec(String(peer.createBody(L.router).endpoint))![1]!;
  netnsEtc = join('/etc/netns', L.node.name);
  await mkdir(netnsEtc, { recursive: true });
  await writeFile(
    join(netnsEtc, 'hosts'),
    `127.0.0.1 localhost\n::1 localhost\n127.0.0.1 evil.lab.test\n${peerAddress} good.lab.test\n`,
  );

  const controllerPort = Number(new URL(L.url).port);
  const socket = join(L.root, 'controller.sock');
  relay = createServer((c) => {
    const u = createConnection(controllerPort, '127.0.0.1');
    c.pipe(u).pipe(c);
    c.on('error', () => u.destroy());
    u.on('error', () => c.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(socket, resolve));
  const forwarder = L.lab.spawn(L.node, process.execPath, [
    '-e',
    `const net = require('node:net');
     net.createServer((c) => {
       const u = net.connect(process.argv[1]);
       c.pipe(u).pipe(c);
       c.on('error', () => u.destroy());
       u.on('error', () => c.destroy());
     }).listen(${FORWARD_PORT}, '127.0.0.1', () => console.log('ready'));`,
    socket,
  ]);
  await new Promise<void>((resolve) => forwarder.stdout?.once('data', () => resolve()));
}, 120_000);

afterAll(async () => {
  await agent?.kill('SIGTERM');
  relay?.close();
  await L?.close();
  if (netnsEtc) await rm(netnsEtc, { recursive: true, force: true });
});

describe('endpoint names on a router', () => {
  it('a name resolving to 127.0.0.1 is never set: 6 with the reason; a good name is set as its address', async () => {
    const approve = async (token: string, body: Record<string, unknown>) => {
      const res = await expectOk(L.h.post('/session', token, body));
      const uuid = (res.json() as { uuid: string }).uuid;
      await expectOk(L.h.post('/admin/session', L.h.admin, { action: 'approve', uuid }));
      return { uuid, port: L.h.store.getSession(uuid)!.spec.listenPort };
    };
    const good = await approve(peer.userToken, {
      ...peer.createBody(L.router),
      endpoint: 'good.lab.test:51820',
    });
    const evil = await approve(L.h.tokens.issueToken(4242427666, 'user').token, {
      ...peer.createBody(L.router),
      ipv6: 'fd42:7666::1',
      linkLocal: 'fe80::7666',
      publicKey: (await wgKeyPair()).publicKey,
      endpoint: 'evil.lab.test:51820',
    });

    agent = L.spawnAgent({ inNamespace: true, url: `http://127.0.0.1:${FORWARD_PORT}` });
    const reason =
      'endpoint evil.lab.test:51820: evil.lab.test resolves to 127.0.0.1, which is a loopback address (127.0.0.0/8): not set on WireGuard';
    await waitFor(
      `the refused session at 6 (agent output: ${agent.output().slice(-2000)})`,
      async () => L.h.store.getSession(evil.uuid)?.status.code === 6,
      45_000,
      200,
    );
    expect(L.h.store.getSession(evil.uuid)?.status.lastError).toEqual({
      code: 'SETUP_FAILED',
      message: reason,
    });
    await waitFor(
      "the good session's tunnel",
      async () => (await L.node.run('ip', ['-o', 'link', 'show'])).includes(`wg_${good.port}`),
      45_000,
      200,
    );
    const endpoints = async (port: number) =>
      (await L.node.run('wg', ['show', `wg_${port}`, 'endpoints'])).trim().split(/\s+/)[1];
    const peerAddress = /^\[([^\]]+)\]/.exec(String(peer.createBody(L.router).endpoint))![1]!;
    expect(await endpoints(good.port)).toBe(`[${peerAddress}]:51820`);
    // the refused session has no tunnel at all, so nothing of the router goes to 127.0.0.1
    expect(await L.node.run('ip', ['-o', 'link', 'show'])).not.toContain(`wg_${evil.port}`);
    expect(L.h.store.getSession(good.uuid)?.status.code).toBe(4);
  });
});
