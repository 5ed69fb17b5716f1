/**
 * BIRD refusing a config or a broken template: the failing session gets status 6 with BIRD's words,
 * the old files come back, and the sessions that were running are untouched.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Agent } from '../../agent/agent.ts';
import { CONFIGURE_PENDING } from '../../agent/bird/apply.ts';
import type { MeshSource } from '../../agent/reconcile/mesh-step.ts';
import { listInterfaces, removeInterface } from '../../agent/wireguard/interface.ts';
import { waitFor } from '../support/netns.ts';
import {
  expectSameBirdTime,
  settledProtocols,
  startAgentLab,
  wgKeyPair,
  type AgentLab,
  type Peer,
} from './lab.ts';

let L: AgentLab;
let good: Agent;
let a: Peer;
let b: Peer;
let uuidA: string;
let uuidB: string;
let portA: number;
const agents: Agent[] = [];
const status = (id: string) => L.h.store.getSession(id)?.status;

beforeAll(async () => {
  L = await startAgentLab('agf');
  a = await L.addPeer('pa', 'fe80::a');
  b = await L.addPeer('pb', 'fe80::b');
  good = L.agent();
  agents.push(good);
  uuidA = await L.approvedSession(a);
  portA = L.h.store.getSession(uuidA)!.spec.listenPort;
  await L.connectPeer(a, portA);
  await good.syncOnce();
  await waitFor(
    'session A Established',
    async () => (await good.bird.protocols(`dn42_${portA}`))[0]?.bgpState === 'Established',
    45_000,
    500,
  );
});
afterAll(async () => {
  for (const agent of agents) await agent.close();
  await L?.close();
});

describe('failed setups', () => {
  it("BIRD refusing one session's file: that session gets 6 with BIRD's message, the other is untouched", async () => {
    // The template renders a directive BIRD does not know, only for sessions without MP-BGP (session B).
    const template = join(L.root, 'broken-branch.mustache');
    await writeFile(
      template,
      (
        await readFile(join(import.meta.dirname, '..', '..', 'examples', 'ebgp-template.mustache'), 'utf8')
      ).replace('    import none;\n', '    import none;\n    no_such_option on;\n'),
    );
    const agent = L.agent({ ebgpConfTemplateFile: template });
    agents.push(agent);
    const fileA = await readFile(join(L.config.routing.peerConfDir, `dn42_${portA}.conf`), 'utf8');
    await settledProtocols(agent.bird);
    const [protoA] = await agent.bird.protocols(`dn42_${portA}`);
    uuidB = await L.approvedSession(b, { mpbgp: false, extendedNextHop: false, ipv4: '172.20.42.2' });
    const portB = L.h.store.getSession(uuidB)!.spec.listenPort;
    const pass = await agent.syncOnce();
    // a new agent reports A once, as it sees it (ACTIVE, BGP Established); B failed
    expect(pass?.reports.filter((r) => r.uuid === uuidA).map((r) => r.status)).toEqual([1]);
    const reportsB = pass?.reports.filter((r) => r.uuid === uuidB);
    expect(reportsB).toHaveLength(1);
    expect(reportsB?.[0]).toMatchObject({ uuid: uuidB, status: 6 });
    expect(reportsB?.[0]?.message).toMatch(new RegExp(`dn42_${portB}\\.conf:\\d+:\\d+`));
    expect(status(uuidB)?.code).toBe(6);
    expect(JSON.stringify(status(uuidB))).toContain(`dn42_${portB}.conf`);
    // Session A: same file, same BGP session (no flap), still ACTIVE.
    expect(await readFile(join(L.config.routing.peerConfDir, `dn42_${portA}.conf`), 'utf8')).toBe(fileA);
    const [protoAfter] = await agent.bird.protocols(`dn42_${portA}`);
    expectSameBirdTime(`dn42_${portA}`, protoAfter?.since, protoA?.since);
    expect(status(uuidA)?.code).toBe(1);
    // Session B's file never reached the live tree; BIRD runs no protocol for it.
    await expect(
      readFile(join(L.config.routing.peerConfDir, `dn42_${portB}.conf`), 'utf8'),
    ).rejects.toThrow();
    expect(await agent.bird.protocols(`dn42_${portB}`)).toEqual([]);
    // A later pass while the retry waits reports nothing new.
    expect((await agent.syncOnce())?.reports).toEqual([]);
    // Deleting B cleans up its tunnel too.
    await L.h.post('/admin/session', L.h.admin, { action: 'disable', uuid: uuidB });
    await agent.syncOnce();
    expect(await listInterfaces('wg_')).toEqual([`wg_${portA}`]);
  });

  it('a template that does not parse: new setups fail with the reason, running sessions keep their files', async () => {
    const template = join(L.root, 'unparsable.mustache');
    await writeFile(template, '{{#ipv4}} unclosed section\n');
    const agent = L.agent({ ebgpConfTemplateFile: template });
    agents.push(agent);
    const fileA = await readFile(join(L.config.routing.peerConfDir, `dn42_${portA}.conf`), 'utf8');
    const before = agent.applier.configureCalls;
    // Session B again (disabled → enabled: status 4), now meeting a template that does not parse.
    expect((await L.h.post('/admin/session', L.h.admin, { action: 'enable', uuid: uuidB })).statusCode).toBe(
      200,
    );
    const pass = await agent.syncOnce();
    expect(pass?.reports.filter((r) => r.uuid === uuidB)).toHaveLength(1);
    expect(pass?.reports.filter((r) => r.uuid === uuidA).map((r) => r.status)).toEqual([1]);
    const failedReport = pass?.reports.find((r) => r.uuid === uuidB && r.status === 6);
    expect(failedReport?.message).toMatch(/eBGP template: .*[Uu]nclosed/);
    expect(status(uuidA)?.code).toBe(1);
    expect(await readFile(join(L.config.routing.peerConfDir, `dn42_${portA}.conf`), 'utf8')).toBe(fileA);
    expect(agent.applier.configureCalls).toBe(before);
  });

  it('the mesh step adds its tunnels and Babel to the same pass; session tunnels stay', async () => {
    const meshPort = 33000 + (Number.parseInt(L.lab.id.slice(-3), 16) % 900);
    const peerId = meshPort - 33000;
    const meshKey = await wgKeyPair();
    // the controller's answer for a second router this lab does not run (the wire format, as in
    // test/agent-policy/mesh.test.ts)
    const mesh: MeshSource = {
      mesh: async () => ({
        peers: [
          {
            router: 'other',
            nodeId: peerId,
            endpoint: '[fd00:99::2]:51820',
            publicKey: meshKey.publicKey,
            linkLocal: 'fe80::99',
            loopback: {},
            listenPort: meshPort,
          },
        ],
      }),
    };
    const agent = L.agent({}, mesh);
    agents.push(agent);
    // A fresh agent retries session B at once, with the built-in template this time.
    expect((await agent.syncOnce())?.failed.size).toBe(0);
    expect(await readFile(L.config.birdMainConfig, 'utf8')).toContain(`interface "wgm_${peerId}"`);
    expect(await listInterfaces('wgm_')).toEqual([`wgm_${peerId}`]);
    expect(await listInterfaces('wg_')).toContain(`wg_${portA}`);
    expect(status(uuidA)?.code).toBe(1);
    const again = await agent.syncOnce();
    expect(again).toMatchObject({ writes: 0, configured: false, interfacesChanged: 0 });
    await removeInterface(`wgm_${peerId}`);
  });

  it('the agent dying between the swap and the configure: the next pass configures although the files match', async () => {
    const agent = good;
    const path = join(L.config.routing.peerConfDir, `dn42_${portA}.conf`);
    const fileA = await readFile(path, 'utf8');
    const main = await readFile(L.config.birdMainConfig, 'utf8');
    // every peer file as it is, session A's as given
    const dir = L.config.routing.peerConfDir;
    const others = new Map<string, string>();
    for (const f of await readdir(dir))
      if (f.endsWith('.conf') && f !== `dn42_${portA}.conf`)
        others.set(f, await readFile(join(dir, f), 'utf8'));
    const treeWith = (content: string) => ({
      main: () => main,
      dirs: [{ key: 'peerConfDir', dir, files: new Map([...others, [`dn42_${portA}.conf`, content]]) }],
    });
    const described = fileA.replace(
      /(protocol bgp dn42_\d+ from \S+ \{\n)/,
      '$1    description "after the crash";\n',
    );
    expect(described).not.toBe(fileA);
    const description = async () =>
      (await agent.bird.command(`show protocols all dn42_${portA}`)).lines.some((l) =>
        l.text.includes('after the crash'),
      );
    // What apply leaves behind when the process dies right after the swap: marker and new file, old config in BIRD.
    await writeFile(join(agent.applier.root, CONFIGURE_PENDING), 'crashed\n');
    await writeFile(path, described);
    expect(await description()).toBe(false);
    const before = agent.applier.configureCalls;
    const result = await agent.applier.apply(treeWith(described));
    expect(result).toMatchObject({ writes: 0, configured: true });
    expect(agent.applier.configureCalls).toBe(before + 1);
    expect(await description()).toBe(true);
    await expect(readFile(join(agent.applier.root, CONFIGURE_PENDING))).rejects.toMatchObject({
      code: 'ENOENT',
    });
    // the marker is gone: files that match are left alone again
    expect(await agent.applier.apply(treeWith(described))).toMatchObject({ writes: 0, configured: false });
    expect(await agent.applier.apply(treeWith(fileA))).toMatchObject({ writes: 1, configured: true });
    expect(await description()).toBe(false);
  });

  it('BIRD gone at configure time: the previous files come back', async () => {
    const agent = good;
    const dir = L.config.routing.peerConfDir;
    const fileA = await readFile(join(dir, `dn42_${portA}.conf`), 'utf8');
    await L.bird.stop();
    const main = await readFile(L.config.birdMainConfig, 'utf8');
    const tree = {
      main: () => main,
      dirs: [
        {
          key: 'peerConfDir',
          dir,
          files: new Map([[`dn42_${portA}.conf`, fileA.replace('import where', 'import where   ')]]),
        },
      ],
    };
    const result = await agent.applier.apply(tree);
    expect(result.failure?.stage).toBe('configure');
    expect(result.configured).toBe(false);
    expect(await readFile(join(dir, `dn42_${portA}.conf`), 'utf8')).toBe(fileA);
  });
});
