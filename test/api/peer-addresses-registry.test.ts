/**
 * Route objects as DN42 reads them (docs/login.md, Route objects) and the approval re-check, through the
 * API with a DN42 registry checkout in the real registry's format (test/fixtures/dn42-registry): the most
 * specific route object decides whose an address is, anycast addresses are no one's tunnel address, approve and enable re-check the route
 * objects and say what changed, a modify's new address meets them as a create's does, and bird-config
 * carries the registry's filter to the agents.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localConfDir, renderMainConfig } from '../../agent/bird/main-config.ts';
import type { BirdConfigResponse } from '../../common/agent-api.ts';
import { parseFilter } from '../../common/dn42-filter.ts';
import { DirectoryRegistry } from '../../controller/auth/login/registry.ts';
import { ADMIN_ASN, expectOk, problem, sessionFields, startHarness, type Harness } from './helpers.ts';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'dn42-registry');
const A = 4242420101; // fd00:abcd:e::/48
const B = 4242420102; // fd00:abcd:e:100::/56, inside A's

type FieldErrors = { errors?: { pointer: string; message: string }[] };

let h: Harness;
let registry: string;
let agentToken: string;

beforeAll(async () => {
  registry = await mkdtemp(join(tmpdir(), 'peerops-dn42-'));
  await cp(FIXTURE, registry, { recursive: true });
  // the registry's own filter6.txt with one more deny line, to tell it from the built-in copy
  const filter6 = join(registry, 'data', 'filter6.txt');
  await writeFile(
    filter6,
    (await readFile(filter6, 'utf8')).replace(
      '1001    permit',
      '0020    deny      fd00:dead::/32              32      128       # ours\n1001    permit',
    ),
  );
  h = await startHarness(
    {},
    { registry: new DirectoryRegistry(registry), serviceHost: 'peering.test', admins: [] },
  );
  agentToken = await h.addRouter('fra1');
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
});
afterAll(async () => {
  await h?.close();
  await rm(registry, { recursive: true, force: true });
});

const as = (asn: number) => h.tokens.issueToken(asn, 'user').token;
const create = (asn: number, extra: Record<string, unknown>) =>
  h.post('/session', as(asn), sessionFields('fra1', extra));

describe('create: the most specific route object the filter permits decides', () => {
  it("refuses A an address in B's /56 inside A's /48, and takes it from B", async () => {
    const res = await create(A, { ipv6: 'fd00:abcd:e:100::1' });
    expect(problem(res)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect((res.json() as FieldErrors).errors).toMatchObject([
      {
        pointer: '/ipv6',
        message:
          "fd00:abcd:e:100::1 is AS4242420102's: route6 fd00:abcd:e:100::/56 is the most specific route object covering it (your route6 fd00:abcd:e::/48 is less specific)",
      },
    ]);
    await expectOk(create(B, { ipv6: 'fd00:abcd:e:100::1' }));
    await expectOk(create(A, { ipv6: 'fd00:abcd:e::1' }));
  });

  it('refuses the anycast service ranges and anycast route objects as tunnel addresses', async () => {
    // DN42's anycast DNS, whoever asks: refused by the address rules before the registry is read
    for (const [field, address] of [
      ['ipv4', '172.20.0.53'],
      ['ipv4', '172.23.0.53'],
      ['ipv6', 'fd42:d42:d42:53::1'],
      ['ipv6', 'fd42:d42:d42:54::1'],
    ] as const) {
      const res = await create(4242420119, { [field]: address });
      expect(problem(res), address).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
      expect((res.json() as FieldErrors).errors, address).toContainEqual(
        expect.objectContaining({
          pointer: `/${field}`,
          message: expect.stringMatching(
            /^is in DN42's anycast service range (172\.2[03]\.0\.0\/24|fd42:d42:d42::\/48) /,
          ),
        }),
      );
    }
    // an object with several origins anywhere else
    const res = await create(A, { ipv6: 'fd00:abcd:a::1' });
    expect(problem(res)).toMatchObject({
      status: 400,
      detail:
        "/ipv6: fd00:abcd:a::1 is an anycast address: route6 fd00:abcd:a::/48 has origins AS4242420101, AS4242420102, and a tunnel address must be one network's own",
    });
  });

  it("refuses an address whose only object the registry's filter denies", async () => {
    const res = await create(4242420104, { ipv6: 'fd00:abcd:e::9', ipv4: '172.22.166.1' });
    expect((res.json() as FieldErrors).errors).toContainEqual(
      expect.objectContaining({
        pointer: '/ipv4',
        message:
          "no route object in the registry gives 172.22.166.1 to AS4242420104 (route 172.22.166.0/24 (AS4242420104, denied by line 0001 of the registry's filter.txt, does not count))",
      }),
    );
  });
});

describe('modify checks new addresses against the route objects as create does', () => {
  it("refuses A's session B's address, naming ipv6, and takes one of A's own", async () => {
    if (h.store.listSessions({ asn: A }).length === 0) await expectOk(create(A, { ipv6: 'fd00:abcd:e::1' }));
    const session = h.store.listSessions({ asn: A })[0];
    if (!session) throw new Error("A's session was not stored");
    const modify = (ipv6: string) =>
      h.post('/session', as(A), { action: 'modify', uuid: session.spec.uuid, ipv6 });
    const refused = await modify('fd00:abcd:e:100::2');
    expect(problem(refused)).toMatchObject({ status: 400, code: 'INVALID_REQUEST' });
    expect((refused.json() as FieldErrors).errors).toMatchObject([
      {
        pointer: '/ipv6',
        message: expect.stringMatching(/^fd00:abcd:e:100::2 is AS4242420102's: route6 fd00:abcd:e:100::\/56/),
      },
    ]);
    expect(h.store.getSession(session.spec.uuid)?.spec.ipv6).toBe(session.spec.ipv6);
    const taken = await expectOk(modify('fd00:abcd:e::2'));
    expect(taken.json()).toMatchObject({ ipv6: 'fd00:abcd:e::2' });
  });
});

describe('approve and enable re-check the route objects', () => {
  it('refuses to approve once the registry gives the address to another network, saying what it says now', async () => {
    // B's session on fra1 is the first test's: this one is on a router of its own
    await h.addRouter('ams1');
    const created = await expectOk(
      h.post('/session', as(B), sessionFields('ams1', { ipv6: 'fd00:abcd:e:100::1' })),
    );
    const { uuid } = created.json() as { uuid: string };
    const name = h.store.getSession(uuid)?.name;
    // B's /56 leaves the registry: the address is A's /48's again
    const file = join(registry, 'data', 'route6', 'fd00:abcd:e:100::_56');
    const object = await readFile(file, 'utf8');
    await unlink(file);
    const res = await h.post('/admin/session', h.admin, { action: 'approve', uuid });
    expect(problem(res)).toMatchObject({
      status: 409,
      code: 'INVALID_STATE',
      detail: `approve: session ${name}: the registry no longer gives its addresses to AS${B}: /ipv6: fd00:abcd:e:100::1 is AS4242420101's: route6 fd00:abcd:e::/48 is the most specific route object covering it; reject it`,
    });
    expect((res.json() as FieldErrors).errors).toMatchObject([
      {
        pointer: '/ipv6',
        message:
          "fd00:abcd:e:100::1 is AS4242420101's: route6 fd00:abcd:e::/48 is the most specific route object covering it",
      },
    ]);
    expect(h.store.getSession(uuid)?.status.code).toBe(3); // still pending review

    // back in the registry: approved; disabled, then the object goes again: enable is refused
    await writeFile(file, object);
    await expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid }));
    await expectOk(h.post('/admin/session', h.admin, { action: 'disable', uuid }));
    await unlink(file);
    const enable = await h.post('/admin/session', h.admin, { action: 'enable', uuid });
    expect(problem(enable)).toMatchObject({ status: 409, code: 'INVALID_STATE' });
    expect(problem(enable).detail).toMatch(
      /^enable: session .*: the registry no longer gives its addresses to AS4242420102/,
    );
    await writeFile(file, object);
    await expectOk(h.post('/admin/session', h.admin, { action: 'enable', uuid }));
  });
});

describe("bird-config carries the registry's filter", () => {
  it('sends filter.txt and filter6.txt as the registry has them, deny lines and all', async () => {
    const res = await expectOk(h.get('/agent/fra1/bird-config', agentToken));
    const { filter } = res.json() as { filter: unknown };
    expect(filter).toEqual({
      ipv4: parseFilter(await readFile(join(registry, 'data', 'filter.txt'), 'utf8'), 'ipv4'),
      ipv6: parseFilter(await readFile(join(registry, 'data', 'filter6.txt'), 'utf8'), 'ipv6'),
    });
    expect((filter as { ipv6: { nr: number; action: string; prefix: string }[] }).ipv6.slice(0, 2)).toEqual([
      { nr: 10, action: 'deny', prefix: 'fdd6:6302:7c04::/48', minLength: 48, maxLength: 128 },
      { nr: 20, action: 'deny', prefix: 'fd00:dead::/32', minLength: 32, maxLength: 128 },
    ]);

    // what the agent renders of it, parsed by real BIRD
    const root = join(registry, 'bird');
    const paths = { peerConfDir: join(root, 'peers'), ibgpConfDir: join(root, 'ibgp.d') };
    for (const d of [paths.peerConfDir, paths.ibgpConfDir, localConfDir(paths)])
      await mkdir(d, { recursive: true });
    const config = renderMainConfig(res.json() as BirdConfigResponse, paths);
    expect(config).toContain('    fd00:dead::/32{32,128} # filter6.txt 0020\n  ] then return false;');
    await writeFile(join(root, 'bird.conf'), config);
    const parsed = await promisify(execFile)('bird', ['-p', '-c', join(root, 'bird.conf')]);
    expect(parsed.stdout + parsed.stderr).toBe('');
  });

  it('sends no filter while it is the built-in copy: an agent older than the field refuses an answer with it', async () => {
    const plain = await startHarness();
    try {
      const token = await plain.addRouter('fra1');
      await expectOk(
        plain.post('/admin/policy', plain.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }),
      );
      const res = await expectOk(plain.get('/agent/fra1/bird-config', token));
      expect(res.json()).not.toHaveProperty('filter');
    } finally {
      await plain.close();
    }
  });
});
