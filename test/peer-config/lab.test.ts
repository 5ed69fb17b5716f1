/**
 * The lab (test/agent/lab.ts: the real controller, a node namespace with the real agent, BIRD and
 * wireguard-go) and a peer namespace configured ONLY from the files of `POST /session` action `config`:
 * the wg-quick file goes to `wg-quick up` (wireguard-go as its userspace implementation, as on a machine
 * without the kernel module) with nothing added but the private key; the BIRD snippet is included from a
 * bird.conf that holds only what any BIRD has (router id, device protocol, the peer's own prefix). The
 * session must reach BGP Established on both sides.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Agent } from '../../agent/agent.ts';
import { PRIVATE_KEY_PLACEHOLDER } from '../../common/peer-config/index.ts';
import { expectOk } from '../api/helpers.ts';
import { exec, waitFor, type Namespace } from '../support/netns.ts';
import { startAgentLab, wgKeyPair, type AgentLab } from '../agent/lab.ts';

let L: AgentLab;
let agent: Agent | undefined;
let peerNs: Namespace;

beforeAll(async () => {
  L = await startAgentLab('pcl');
  peerNs = await L.lab.namespace('peer');
  await L.lab.veth(L.node, peerNs, { a: 'fd00:77::1/64', b: 'fd00:77::2/64' });
  // The router as the peer sees it: its address on the veth towards the peer, and its agent's real key.
  await expectOk(
    L.h.post('/admin/router', L.h.admin, {
      action: 'update',
      name: L.router,
      spec: { endpointHost: 'fd00:77::1', publicKey: L.nodeKeys.publicKey },
    }),
  );
}, 60_000);
afterAll(async () => {
  await agent?.close();
  await L?.close();
});

interface ConfigAnswer {
  format: string;
  files: { name: string; content: string }[];
}

describe('a peer configured only from the generated files', () => {
  it('reaches BGP Established with the real agent', async () => {
    const asn = 4242421700 + (Number.parseInt(L.lab.id.slice(-2), 16) % 90);
    const user = L.h.tokens.issueToken(asn, 'user').token;
    const keys = await wgKeyPair();
    const prefix = `fd42:${(asn % 10000).toString(16)}::/48`;
    const created = await expectOk(
      L.h.post('/session', user, {
        action: 'create',
        router: L.router,
        ipv6: `fd42:${(asn % 10000).toString(16)}::1`,
        linkLocal: 'fe80::1234',
        endpoint: '[fd00:77::2]:51820',
        publicKey: keys.publicKey,
      }),
    );
    const uuid = (created.json() as { uuid: string }).uuid;
    await expectOk(L.h.post('/admin/session', L.h.admin, { action: 'approve', uuid }));

    const config = async (format: string) =>
      (await expectOk(L.h.post('/session', user, { action: 'config', uuid, format }))).json() as ConfigAnswer;
    const [wgFile] = (await config('wg-quick')).files;
    const [birdFile] = (await config('bird')).files;
    if (!wgFile || !birdFile) throw new Error('config answered no file');

    // The peer's machine: the wg-quick file with the private key put in, nothing else.
    const dir = await L.lab.tempDir('peer');
    await mkdir(join(dir, 'wireguard'), { mode: 0o700 });
    const wgPath = join(dir, 'wireguard', wgFile.name);
    await writeFile(wgPath, wgFile.content.replace(PRIVATE_KEY_PLACEHOLDER, keys.privateKey), {
      mode: 0o600,
    });
    const up = await exec(
      'ip',
      [
        'netns',
        'exec',
        peerNs.name,
        'env',
        'WG_QUICK_USERSPACE_IMPLEMENTATION=wireguard-go',
        'wg-quick',
        'up',
        wgPath,
      ],
      { timeoutMs: 30_000 },
    );
    expect(up.code, up.stderr).toBe(0);
    const iface = wgFile.name.replace(/\.conf$/, '');

    // BIRD: the generated snippet, included from the smallest bird.conf a peer has anyway.
    const snippet = join(dir, birdFile.name);
    await writeFile(snippet, birdFile.content);
    const peerBird = await L.lab.startBird(
      peerNs,
      [
        'router id 10.9.77.2;',
        'protocol device {}',
        `protocol static { ipv6; route ${prefix} unreachable; }`,
        `include "${snippet}";`,
        '',
      ].join('\n'),
    );

    agent = L.agent();
    const pass = await agent.syncOnce();
    expect(pass?.failed.size).toBe(0);
    const port = L.h.store.getSession(uuid)?.spec.listenPort;
    const protocol = birdFile.content.match(/^protocol bgp (\S+)/m)?.[1] ?? '';
    await waitFor(
      'BGP Established on the router',
      async () => (await agent?.bird.protocols(`dn42_${port}`))?.[0]?.bgpState === 'Established',
      60_000,
      500,
    ).catch(async (err: unknown) => {
      // what a reader of a failure needs: both ends' BGP and WireGuard state
      const peerState = await peerBird.birdc(`show protocols all ${protocol}`).catch(String);
      const routerState = await L.bird.birdc(`show protocols all dn42_${port}`).catch(String);
      // wireguard-go's control sockets are not per namespace: `wg show` here lists both ends' tunnels
      const wg = await peerNs.exec('wg', ['show']);
      const addrs = await peerNs.exec('ip', ['addr']);
      throw new Error(
        `${String(err)}\npeer BIRD:\n${peerState}\nrouter BIRD:\n${routerState}\nWireGuard:\n${wg.stdout}\npeer addresses:\n${addrs.stdout}`,
      );
    });
    expect(await peerBird.birdc(`show protocols ${protocol}`)).toMatch(/Established/);
    // the peer's prefix reached the router over the session
    await waitFor(
      "the peer's prefix on the router",
      async () => (await agent?.bird.protocols(`dn42_${port}`))?.[0]?.routesImported === 1,
      30_000,
      500,
    );
    expect(await readFile(wgPath, 'utf8')).not.toContain(PRIVATE_KEY_PLACEHOLDER);
    expect((await peerNs.run('wg', ['show', iface, 'latest-handshakes'])).trim()).not.toMatch(/\t0$/);
  }, 180_000);
});
