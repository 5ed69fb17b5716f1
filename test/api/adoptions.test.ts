/**
 * `POST /admin/adoptions` (docs/api.md, Adoptions) against a real `peerops serve` on the git store with a
 * DN42 registry checkout (test/fixtures/dn42-registry): adopted sessions arrive awaiting review with who
 * and when, one the registry refuses arrives DISABLED with the keyed reason, a taken port or interface is
 * refused for that session alone, a re-apply changes nothing, and an approved session reaches its agent
 * with the names it keeps. A session without the peer's DN42 IPv6 (the wiki's link-local-only peers) is
 * adopted as it is; one without a link-local is refused. `peerops adopt --apply` (and `--plan`) sends a
 * plan read from hand-made files, and a user's create without ipv6 is still refused naming the field.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseManifest, renderManifest } from '../../common/manifests.ts';
import type { ControllerProcess } from '../support/controller-process.ts';
import { startWithRegistry } from '../support/controller-process.ts';
import { runPeerops } from '../cli/run.ts';
import { plannedSession, routerFields } from './helpers.ts';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'dn42-registry');
const A = 4242420101; // fd00:abcd:e::/48
const B = 4242420102; // fd00:abcd:e:100::/56
const C = 4242420103;
const key = () => randomBytes(32).toString('base64');

let dir: string;
let controller: ControllerProcess;
let admin: string;
let agentToken: string;

const planned = plannedSession;

type Outcome = {
  outcome: string;
  uuid?: string;
  statusName?: string;
  message?: string;
  errors?: { pointer: string; key?: string }[];
};

const apply = (sessions: unknown[]) => controller.post(admin, '/admin/adoptions', { sessions });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-adoptions-'));
  controller = await startWithRegistry(dir, FIXTURE);
  admin = await controller.token(4242420000, 'admin');
  const added = await controller.post(admin, '/admin/router', { action: 'add', ...routerFields('fra1') });
  expect(added.status, JSON.stringify(added.body)).toBe(200);
  agentToken = added.body.agentToken as string;
}, 60_000);

afterAll(async () => {
  await controller?.kill();
  await rm(dir, { recursive: true, force: true });
});

describe('POST /admin/adoptions', () => {
  it('creates the plan: awaiting review, DISABLED where the registry refuses, refusals per session', async () => {
    const res = await apply([
      planned(A, 31001, 'wg_alice', { ipv6: 'fd00:abcd:e::5' }),
      // B's address for C: the registry gives it to B
      planned(C, 31002, 'wg_carol', { ipv6: 'fd00:abcd:e:100::7' }),
      // the port A's session just took
      planned(B, 31001, 'wg_bob', { ipv6: 'fd00:abcd:e:100::1' }),
      // no DN42 address in the hand-made files, as the DN42 wiki's peers: adopted as it is
      planned(4242420104, 31004, 'wg_dave'),
      // no link-local either: nothing to peer over
      planned(4242420105, 31005, 'wg_erin', { linkLocal: undefined }),
    ]);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ created: 3, unchanged: 0, refused: 2 });
    const [alice, carol, bob, dave, erin] = res.body.sessions as Outcome[];
    expect(alice).toMatchObject({ outcome: 'created', statusName: 'PENDING_REVIEW' });
    expect(carol).toMatchObject({ outcome: 'created', statusName: 'DISABLED' });
    expect(carol?.message).toMatch(/^adopted as DISABLED: the DN42 registry refuses \/ipv6: /);
    expect(bob).toMatchObject({ outcome: 'refused' });
    expect(bob?.errors).toContainEqual(expect.objectContaining({ pointer: '/sessions/2/listenPort' }));
    expect(dave).toMatchObject({ outcome: 'created', statusName: 'PENDING_REVIEW' });
    expect(erin?.errors).toEqual([
      expect.objectContaining({ pointer: '/sessions/4/linkLocal', key: 'field.adoptNeedsAddress' }),
    ]);

    const list = await controller.post(admin, '/admin/session', { action: 'list' });
    const sessions = list.body.sessions as Record<string, unknown>[];
    expect(sessions).toHaveLength(3);
    // the record keeps its wire shape: a string, empty where the session has no DN42 IPv6
    expect(sessions.find((s) => s.uuid === dave?.uuid)).toMatchObject({ ipv6: '', ipv6LinkLocal: 'fe80::2' });
    const stored = sessions.find((s) => s.uuid === alice?.uuid);
    expect(stored).toMatchObject({
      listenPort: 31001,
      adopted: {
        by: 'admin AS4242420000',
        interface: 'wg_alice',
        protocols: ['dn42_101'],
        files: ['/etc/wireguard/wg_alice.conf', '/etc/bird/peers/as4242420101.conf'],
      },
    });
    const disabled = sessions.find((s) => s.uuid === carol?.uuid);
    expect(disabled).toMatchObject({ lastError: { key: 'lastError.registryRefused' } });
  });

  it('re-applied after a restart, answers the same sessions unchanged, and refuses an interface another session has', async () => {
    // the git store reads the adopted blocks back from its manifests
    await controller.kill();
    await controller.start();
    const before = await controller.post(admin, '/admin/session', { action: 'list' });
    const res = await apply([
      planned(A, 31001, 'wg_alice', { ipv6: 'fd00:abcd:e::5' }),
      planned(B, 31005, 'wg_alice', { ipv6: 'fd00:abcd:e:100::1' }),
    ]);
    expect(res.body).toMatchObject({ created: 0, unchanged: 1, refused: 1 });
    const [again, clash] = res.body.sessions as Outcome[];
    expect(again?.uuid).toBe((before.body.sessions as { uuid: string }[])[0]?.uuid);
    expect(clash?.errors).toEqual([
      expect.objectContaining({
        pointer: '/sessions/1/adopted/interface',
        key: 'field.adoptedInterfaceTaken',
      }),
    ]);
    const after = await controller.post(admin, '/admin/session', { action: 'list' });
    expect(after.body.sessions).toHaveLength(3);
  });

  it('refuses who and when from the client, and names the field', async () => {
    const s = planned(4242420119, 31006, 'wg_x', { ipv6: 'fd00:abcd:e::9' });
    const res = await apply([{ ...s, adopted: { ...s.adopted, by: 'someone' } }]);
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('/sessions/0/adopted/by');
    const bad = await apply([{ ...s, adopted: { ...s.adopted, interface: 'wg/../../x' } }]);
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('/sessions/0/adopted/interface');
  });

  it('serves an approved adopted session to its agent with the kept names, not who adopted it', async () => {
    const list = await controller.post(admin, '/admin/session', { action: 'list' });
    const listed = list.body.sessions as { uuid: string; asn: number; statusName: string }[];
    const alice = listed.find((s) => s.asn === A);
    const dave = listed.find((s) => s.asn === 4242420104);
    for (const s of [alice, dave]) {
      const approved = await controller.post(admin, '/admin/session', { action: 'approve', uuid: s?.uuid });
      expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    }
    const served = await controller.get('/agent/fra1/sessions', agentToken);
    const sessions = served.body.sessions as Record<string, unknown>[];
    // the agent is told the session has no DN42 IPv6: no route into the tunnel for it
    expect(sessions.find((s) => s.uuid === dave?.uuid)).toMatchObject({ ipv6: null, linkLocal: 'fe80::2' });
    expect(sessions.find((s) => s.uuid === alice?.uuid)).toMatchObject({
      statusName: 'QUEUED_FOR_SETUP',
      listenPort: 31001,
      ipv6: 'fd00:abcd:e::5',
      adopted: {
        interface: 'wg_alice',
        protocols: ['dn42_101'],
        files: ['/etc/wireguard/wg_alice.conf', '/etc/bird/peers/as4242420101.conf'],
      },
    });
    expect(sessions.find((s) => s.uuid === alice?.uuid)?.adopted).not.toHaveProperty('by');
    // the one the registry refuses is served DISABLED: its router does not run it
    expect(sessions.filter((s) => s.uuid !== alice?.uuid && s.uuid !== dave?.uuid)).toEqual([
      expect.objectContaining({
        statusName: 'DISABLED',
        adopted: expect.objectContaining({ interface: 'wg_carol' }),
      }),
    ]);
  });
});

/** The real `peerops adopt`: exit status and output. */
const adoptCli = (args: string[]) => runPeerops(['adopt', ...args], { PEEROPS_CONFIG_DIR: join(dir, 'cli') });

describe('peerops adopt --apply', () => {
  it("sends the plan of the wiki's hand-made files (link-local neighbors only) as it is, and again from --plan", async () => {
    const added = await controller.post(admin, '/admin/router', { action: 'add', ...routerFields('ber1') });
    expect(added.status).toBe(200);
    // the DN42 wiki's layout: wg-quick files, bird.conf including one file per peer
    const hand = join(dir, 'hand');
    await mkdir(join(hand, 'wg'), { recursive: true });
    await mkdir(join(hand, 'bird', 'peers'), { recursive: true });
    await mkdir(join(hand, 'networkd'), { recursive: true });
    await writeFile(
      join(hand, 'bird', 'bird.conf'),
      `router id 172.20.0.1;\ntemplate bgp dnpeers {\n  local as 4242420000;\n  ipv4 { import all; export all; extended next hop on; };\n  ipv6 { import all; export all; };\n}\ninclude "${join(hand, 'bird', 'peers')}/*";\n`,
    );
    const peers = [
      { asn: A, n: 1 },
      { asn: C, n: 3 },
    ];
    for (const { asn, n } of peers) {
      await writeFile(
        join(hand, 'wg', `wg_p${n}.conf`),
        `[Interface]\nListenPort = ${31010 + n}\nPostUp = ip addr add fe80::1/64 dev %i\n\n[Peer]\nPublicKey = ${key()}\nEndpoint = peer${n}.example.net:2${n}000\nAllowedIPs = 0.0.0.0/0, ::/0\n`,
      );
      await writeFile(
        join(hand, 'bird', 'peers', `as${asn}.conf`),
        `protocol bgp dn42_p${n} from dnpeers {\n  neighbor fe80::1${n}%wg_p${n} as ${asn};\n}\n`,
      );
    }
    const read = [
      '--router',
      'ber1',
      '--files-only',
      '--wireguard-dir',
      join(hand, 'wg'),
      '--networkd-dir',
      join(hand, 'networkd'),
      '--bird-conf',
      join(hand, 'bird', 'bird.conf'),
    ];
    const target = ['--url', controller.base, '--token', admin];

    // link-local neighbors only, as in the wiki: applied with no edit
    const first = await adoptCli([...read, '--apply', ...target]);
    expect(first.stderr).toContain('2 adopted, 0 already adopted, 0 refused');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain('created AS4242420101 wg_p1 (PENDING_REVIEW)');

    // the plan printed and applied from its file: the same sessions
    const printed = await adoptCli([...read, '-o', 'json']);
    const plan = JSON.parse(printed.stdout) as { sessions: { asn: number; ipv6?: string }[] };
    expect(plan.sessions.map((s) => s.ipv6)).toEqual([undefined, undefined]);
    const file = join(dir, 'plan.json');
    await writeFile(file, JSON.stringify(plan));

    const list = await controller.post(admin, '/admin/session', { action: 'list', router: 'ber1' });
    expect(list.body.sessions).toEqual([
      expect.objectContaining({
        asn: A,
        listenPort: 31011,
        adopted: expect.objectContaining({
          interface: 'wg_p1',
          protocols: ['dn42_p1'],
          files: [join(hand, 'wg', 'wg_p1.conf'), join(hand, 'bird', 'peers', `as${A}.conf`)],
        }),
      }),
      expect.objectContaining({ asn: C, listenPort: 31013 }),
    ]);

    // session show says it too
    const uuid = (list.body.sessions as { uuid: string }[])[0]?.uuid ?? '';
    const shown = await new Promise<string>((resolve) => {
      const p = spawn(
        process.execPath,
        ['bin/peerops.ts', 'session', 'show', uuid, '--url', controller.base, '--token', admin],
        { env: { ...process.env, PEEROPS_CONFIG_DIR: join(dir, 'cli') }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      p.stdout.on('data', (b: Buffer) => (out += b.toString()));
      p.once('exit', () => resolve(out));
    });
    expect(shown).toMatch(
      new RegExp(
        `^adopted +from ${join(hand, 'wg', 'wg_p1.conf')}, ${join(hand, 'bird', 'peers', `as${A}.conf`)} by admin AS4242420000 at \\d{4}-`,
        'm',
      ),
    );
    expect(shown).toMatch(/^kept names +interface wg_p1, BIRD protocols dn42_p1$/m);
    expect(shown).toMatch(/^ipv6 +-$/m);

    // applied again: the same sessions, nothing new
    const again = await adoptCli(['--plan', file, '--apply', ...target]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain('0 adopted, 2 already adopted, 0 refused');
    expect(JSON.parse(await readFile(file, 'utf8'))).toEqual(plan);

    // the peer adds its DN42 IPv6 later with a modify: the registry judges it as a create's
    const alice = (list.body.sessions as { uuid: string; asn: number }[]).find((s) => s.asn === A);
    const peer = await controller.token(A, 'user');
    const modify = (ipv6: string) =>
      controller.post(peer, '/session', { action: 'modify', uuid: alice?.uuid, ipv6 });
    const notTheirs = await modify('fd00:abcd:e:100::9');
    expect(notTheirs.status).toBe(400);
    expect(notTheirs.body.errors).toEqual([expect.objectContaining({ pointer: '/ipv6' })]);
    const withIpv6 = await modify('fd00:abcd:e::21');
    expect(withIpv6.status, JSON.stringify(withIpv6.body)).toBe(200);
    expect(withIpv6.body).toMatchObject({ ipv6: 'fd00:abcd:e::21', statusName: 'PENDING_REVIEW' });
  });
});

describe('a session manifest in git', () => {
  it('may leave out ipv6 only when adopted, and the refusal names the field', () => {
    const spec = {
      asn: A,
      router: 'fra1',
      linkLocal: 'fe80::2',
      publicKey: key(),
      mtu: 1420,
      listenPort: 31020,
    };
    const file = `sessions/fra1/as${A}.yaml`;
    const plain = parseManifest(file, renderManifest('PeeringSession', `as${A}-fra1`, spec));
    expect(plain).toMatchObject({
      ok: false,
      errors: [expect.objectContaining({ pointer: '/spec/ipv6', key: 'field.ipv6UnlessAdopted' })],
    });
    const adopted = {
      ...spec,
      adopted: { by: 'admin', at: new Date().toISOString(), ...planned(A, 31020, 'wg_p').adopted },
    };
    expect(parseManifest(file, renderManifest('PeeringSession', `as${A}-fra1`, adopted)).ok).toBe(true);
  });
});

describe('a user create', () => {
  it("still needs the peer's DN42 IPv6, and the refusal names the field", async () => {
    const user = await controller.token(4242420106, 'user');
    const res = await controller.post(user, '/session', {
      action: 'create',
      router: 'fra1',
      linkLocal: 'fe80::6',
      publicKey: key(),
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: 'INVALID_REQUEST',
      errors: [expect.objectContaining({ pointer: '/ipv6', key: 'field.required' })],
    });
  });
});
