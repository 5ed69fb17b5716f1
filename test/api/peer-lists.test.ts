/**
 * The agents' peer lists (mesh, bird-config's and config's iBGP and mesh peers), joined from entries
 * encoded once per router: each answer is what the routers show, in the response schema, with the
 * asker's own mesh port and without the asker; a change of a router shows in every other router's
 * answers, and only that router's entries are built again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Value } from 'typebox/value';
import {
  BirdConfigResponse,
  BootstrapConfigResponse,
  MeshResponse,
  type IbgpPeer,
  type MeshPeer,
} from '../../common/agent-api.ts';
import { formatEndpoint } from '../../common/net.ts';
import { meshListenPort } from '../../common/naming.ts';
import { PeerLists } from '../../controller/api/peer-lists.ts';
import { ADMIN_ASN, expectOk, startHarness, wgKey, type Harness } from './helpers.ts';

let h: Harness;
const tokens = new Map<string, string>();
const names = ['ams1', 'fra1', 'lon1', 'nyc1'];

beforeAll(async () => {
  h = await startHarness();
  tokens.set('ams1', await h.addRouter('ams1', { endpointHost: '2001:DB8:0:0::1' }));
  tokens.set('fra1', await h.addRouter('fra1', { loopback: { ipv6: 'fd00::fa' } }));
  tokens.set('lon1', await h.addRouter('lon1'));
  tokens.set('nyc1', await h.addRouter('nyc1')); // never sends a mesh key: in no mesh list
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
  for (const name of ['ams1', 'fra1', 'lon1']) await heartbeat(name, wgKey());
});
afterAll(async () => h?.close());

const heartbeat = (router: string, meshPublicKey: string) =>
  expectOk(
    h.post(`/agent/${router}/heartbeat`, tokens.get(router), { version: '1.0.0', uptime: 1, meshPublicKey }),
  );
const answer = async (router: string, path: string): Promise<unknown> =>
  (await expectOk(h.get(`/agent/${router}/${path}`, tokens.get(router)))).json();

/** The lists as the store's routers show them, built field by field for the asker `self`. */
function expected(self: string): { mesh: MeshPeer[]; ibgp: IbgpPeer[] } {
  const asker = h.store.getRouter(self);
  if (!asker) throw new Error(`no router ${self}`);
  const others = h.store.listRouters().filter((r) => r.name !== self);
  return {
    ibgp: others.map((r) => ({ router: r.name, nodeId: r.spec.nodeId, loopback: { ...r.spec.loopback } })),
    mesh: others
      .filter((r) => r.status.meshPublicKey)
      .map((r) => ({
        router: r.name,
        nodeId: r.spec.nodeId,
        endpoint: formatEndpoint({ host: r.spec.endpointHost, port: meshListenPort(asker.spec.nodeId) }),
        publicKey: r.status.meshPublicKey as string,
        linkLocal: r.spec.linkLocal,
        loopback: { ...r.spec.loopback },
        listenPort: meshListenPort(r.spec.nodeId),
      })),
  };
}

/** Every router's three answers: in their schemas, with the lists the store's routers give. */
async function expectAnswersShowTheStore(): Promise<void> {
  for (const name of names) {
    const want = expected(name);
    const mesh = await answer(name, 'mesh');
    const bird = await answer(name, 'bird-config');
    const config = await answer(name, 'config');
    expect(Value.Check(MeshResponse, mesh), `${name} mesh`).toBe(true);
    expect(Value.Check(BirdConfigResponse, bird), `${name} bird-config`).toBe(true);
    expect(Value.Check(BootstrapConfigResponse, config), `${name} config`).toBe(true);
    expect(mesh, name).toEqual({ peers: want.mesh });
    expect(bird, name).toMatchObject({ dn42Asn: ADMIN_ASN, ibgpPeers: want.ibgp });
    expect(config, name).toMatchObject({ asn: ADMIN_ASN, meshPeers: want.mesh, ibgpPeers: want.ibgp });
  }
}

describe('agent peer lists', () => {
  it('list the other routers as the store holds them, with the asker’s mesh port', async () => {
    await expectAnswersShowTheStore();
    const fraMesh = (await answer('fra1', 'mesh')) as { peers: MeshPeer[] };
    const port = meshListenPort(h.store.getRouter('fra1')?.spec.nodeId ?? 0);
    expect(fraMesh.peers.map((p) => p.router)).toEqual(['ams1', 'lon1']);
    expect(fraMesh.peers[0]?.endpoint).toBe(`[2001:db8::1]:${port}`);
    expect(fraMesh.peers[1]?.endpoint).toBe(`lon1.example.net:${port}`);
    // a loopback without IPv4 is listed without it
    const amsBird = (await answer('ams1', 'bird-config')) as { ibgpPeers: IbgpPeer[] };
    expect(amsBird.ibgpPeers.find((p) => p.router === 'fra1')?.loopback).toEqual({ ipv6: 'fd00::fa' });
  });

  it('show a change of a router to every other router', async () => {
    const key = wgKey();
    await heartbeat('lon1', key);
    await heartbeat('nyc1', wgKey()); // joins the mesh lists
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'ams1',
        spec: { endpointHost: 'ams1.example.org', loopback: { ipv4: '172.20.9.9', ipv6: 'fd00::99' } },
      }),
    );
    await expectAnswersShowTheStore();
    const fraMesh = (await answer('fra1', 'mesh')) as { peers: MeshPeer[] };
    expect(fraMesh.peers.find((p) => p.router === 'lon1')?.publicKey).toBe(key);
    expect(fraMesh.peers.find((p) => p.router === 'ams1')?.endpoint).toMatch(/^ams1\.example\.org:\d+$/);
    expect(fraMesh.peers.map((p) => p.router)).toContain('nyc1');
    const lonBird = (await answer('lon1', 'bird-config')) as { ibgpPeers: IbgpPeer[] };
    expect(lonBird.ibgpPeers.find((p) => p.router === 'ams1')?.loopback).toEqual({
      ipv4: '172.20.9.9',
      ipv6: 'fd00::99',
    });
  });

  it('build a router’s entries once per change of what they show', async () => {
    const lists = new PeerLists(h.store);
    const askAll = () => {
      for (const name of names) {
        const router = h.store.getRouter(name);
        if (!router) throw new Error(name);
        lists.mesh(router);
        lists.ibgp(name);
      }
    };
    askAll();
    expect(lists.builds).toBe(names.length);
    askAll();
    expect(lists.builds).toBe(names.length);
    // a heartbeat with the same key changes the router's status, not what its entries show
    await heartbeat('fra1', h.store.getRouter('fra1')?.status.meshPublicKey as string);
    askAll();
    expect(lists.builds).toBe(names.length);
    await heartbeat('fra1', wgKey());
    askAll();
    expect(lists.builds).toBe(names.length + 1);
    await expectOk(
      h.post('/admin/router', h.admin, { action: 'update', name: 'nyc1', spec: { linkLocal: 'fe80::42' } }),
    );
    askAll();
    expect(lists.builds).toBe(names.length + 2);
    const fra = h.store.getRouter('fra1');
    if (!fra) throw new Error('fra1');
    const nyc = (JSON.parse(lists.mesh(fra).toString()) as MeshPeer[]).find((p) => p.router === 'nyc1');
    expect(nyc?.linkLocal).toBe('fe80::42');
    lists.close();
  });

  it('are the same joined from blocks of any size', async () => {
    for (const size of [1, 2, 3]) {
      const lists = new PeerLists(h.store, size);
      for (const name of names) {
        const router = h.store.getRouter(name);
        if (!router) throw new Error(name);
        expect(JSON.parse(lists.mesh(router).toString()), `${name}, blocks of ${size}`).toEqual(
          expected(name).mesh,
        );
        expect(JSON.parse(lists.ibgp(name).toString()), `${name}, blocks of ${size}`).toEqual(
          expected(name).ibgp,
        );
      }
      // a change in one block, seen from the others
      await heartbeat('ams1', wgKey());
      const lon = h.store.getRouter('lon1');
      if (!lon) throw new Error('lon1');
      expect(JSON.parse(lists.mesh(lon).toString())).toEqual(expected('lon1').mesh);
      lists.close();
    }
  });

  it('are tagged alike only when their bytes are alike, and tagged anew when they change', async () => {
    const lists = new PeerLists(h.store, 2);
    const around = ['{"x":1,"peers":', '}'] as const;
    /** Every asker's answers and tags, for each list. */
    const snapshot = () =>
      names.flatMap((name) => {
        const router = h.store.getRouter(name);
        if (!router) throw new Error(name);
        return [
          { what: `mesh ${name}`, tag: lists.meshTag(router, around), bytes: lists.mesh(router, around) },
          { what: `ibgp ${name}`, tag: lists.ibgpTag(name, around), bytes: lists.ibgp(name, around) },
        ];
      });
    const before = snapshot();
    // asked again with nothing changed: the same tags
    expect(snapshot().map((a) => a.tag)).toEqual(before.map((a) => a.tag));
    await heartbeat('lon1', wgKey());
    const after = snapshot();
    // a tag names one answer's bytes: a 304 is never wrong
    for (const a of [...before, ...after])
      for (const b of [...before, ...after])
        if (a.tag === b.tag) expect(a.bytes.equals(b.bytes), `${a.what} and ${b.what}`).toBe(true);
    // the new key shows in every other router's mesh list, in no iBGP list (lon1's own mesh list, which
    // leaves it out, may be tagged anew: its block changed)
    for (const [i, a] of after.entries()) {
      if (a.what === 'mesh lon1') continue;
      expect(a.tag !== before[i]?.tag, a.what).toBe(a.what.startsWith('mesh'));
    }
    // the text around the list is part of the tag
    const ams = h.store.getRouter('ams1');
    if (!ams) throw new Error('ams1');
    expect(lists.meshTag(ams, ['{"peers":', '}'])).not.toBe(lists.meshTag(ams, around));
    lists.close();
  });

  it('are empty for a lone router, and list a second one once it comes', async () => {
    const lone = await startHarness();
    try {
      const token = await lone.addRouter('one1');
      await expectOk(lone.post('/admin/policy', lone.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
      const beat = { version: '1.0.0', uptime: 1, meshPublicKey: wgKey() };
      await expectOk(lone.post('/agent/one1/heartbeat', token, beat));
      const get = async (path: string) => (await expectOk(lone.get(`/agent/one1/${path}`, token))).json();
      expect(await get('mesh')).toEqual({ peers: [] });
      expect(await get('bird-config')).toMatchObject({ ibgpPeers: [] });
      const twoToken = await lone.addRouter('two1');
      await expectOk(lone.post('/agent/two1/heartbeat', twoToken, { ...beat, meshPublicKey: wgKey() }));
      expect(((await get('mesh')) as { peers: MeshPeer[] }).peers.map((p) => p.router)).toEqual(['two1']);
      expect(((await get('config')) as { ibgpPeers: IbgpPeer[] }).ibgpPeers.map((p) => p.router)).toEqual([
        'two1',
      ]);
    } finally {
      await lone.close();
    }
  });
});
