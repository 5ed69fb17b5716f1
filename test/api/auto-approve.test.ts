/**
 * A router's autoApprove takes effect only where something checks that a session's addresses are the
 * peer's own (docs/operator-guide.md, section 4): the DN42 registry's route objects (the real registry's
 * format, test/fixtures/dn42-registry), or the operator's PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY. Without
 * either, turning it on is refused and a router that has it (a merged manifest, an older install) sends
 * new sessions and new addresses to review.
 */
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DirectoryRegistry, UsersFileRegistry } from '../../controller/auth/login/registry.ts';
import { admin, routerSpec } from '../store/fixtures.ts';
import {
  ADMIN_ASN,
  expectOk,
  problem,
  routerFields,
  sessionFields,
  startHarness,
  type Harness,
} from './helpers.ts';

const FIXTURE = join(import.meta.dirname, '..', 'fixtures', 'dn42-registry');
const OWNER = 4242420101; // fd00:abcd:e::/48 in the fixture

let h: Harness | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await h?.close();
  h = undefined;
});
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'peerops-auto-approve-'));
  dirs.push(dir);
  return dir;
}

async function withPolicy(harness: Harness): Promise<Harness> {
  await expectOk(
    harness.post('/admin/policy', harness.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }),
  );
  return harness;
}

type Refusal = { status: number; code: string; detail: string; errors?: { pointer: string; key?: string }[] };

/** The refusal's problem+json (helpers' `problem` checks the form), with its field errors. */
function refusal(res: Parameters<typeof problem>[0]): Refusal {
  const said = problem(res);
  expect([said.status, said.code]).toEqual([400, 'INVALID_REQUEST']);
  return res.json() as Refusal;
}

const create = (harness: Harness, asn: number, extra: Record<string, unknown> = {}) =>
  harness.post('/session', harness.tokens.issueToken(asn, 'user').token, sessionFields('fra1', extra));

describe('without a DN42 registry (admin-minted tokens)', () => {
  it('refuses to turn autoApprove on, naming the field and what to set; nothing stored', async () => {
    h = await withPolicy(await startHarness());
    const added = await h.post('/admin/router', h.admin, {
      action: 'add',
      ...routerFields('fra1', { autoApprove: true }),
    });
    const body = refusal(added);
    expect(body.errors).toEqual([
      expect.objectContaining({ pointer: '/autoApprove', key: 'field.autoApproveUnchecked' }),
    ]);
    expect(body.detail).toMatch(/PEEROPS_REGISTRY.*PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY=true/);
    expect(h.store.getRouter('fra1')).toBeUndefined();

    await h.addRouter('fra1');
    const updated = await h.post('/admin/router', h.admin, {
      action: 'update',
      name: 'fra1',
      spec: { autoApprove: true, maxSessions: 5 },
    });
    expect(refusal(updated).errors).toEqual([
      expect.objectContaining({ pointer: '/spec/autoApprove', key: 'field.autoApproveUnchecked' }),
    ]);
    expect(h.store.getRouter('fra1')?.spec).not.toHaveProperty('maxSessions');
  });

  it('sends a create and a new address to review on a router that has it stored', async () => {
    h = await withPolicy(await startHarness());
    // as a manifest merged into the repository, or a router of an install before this rule, has it
    await h.store.createRouter('fra1', routerSpec(1, { autoApprove: true }), admin);
    const created = await expectOk(create(h, 4242423901));
    const { uuid, status } = created.json() as { uuid: string; status: number };
    expect(status).toBe(3);

    // approved, then a new address: back to review, as on a router without autoApprove
    await expectOk(h.post('/admin/session', h.admin, { action: 'approve', uuid }));
    const modified = await expectOk(
      h.post('/session', h.tokens.issueToken(4242423901, 'user').token, {
        action: 'modify',
        uuid,
        ipv6: 'fd42:4242:3901::2',
      }),
    );
    expect((modified.json() as { status: number }).status).toBe(3);

    // the router list says it is set and does not hold, as the portal and the CLI show it
    const list = await expectOk(h.post('/admin/router', h.admin, { action: 'list' }));
    expect((list.json() as { routers: unknown[] }).routers).toEqual([
      expect.objectContaining({
        spec: expect.objectContaining({ autoApprove: true }),
        autoApproveHolds: false,
      }),
    ]);

    // an update that sends the stored value back (the portal's edit form does) is not refused for it
    await expectOk(
      h.post('/admin/router', h.admin, {
        action: 'update',
        name: 'fra1',
        spec: { autoApprove: true, maxSessions: 5 },
      }),
    );
  });

  it('a users file checks no address either: turning autoApprove on is refused', async () => {
    const dir = await tempDir();
    const users = join(dir, 'users');
    await writeFile(users, '');
    h = await withPolicy(
      await startHarness(
        {},
        { registry: new UsersFileRegistry(users), serviceHost: 'peering.test', admins: [] },
      ),
    );
    const added = await h.post('/admin/router', h.admin, {
      action: 'add',
      ...routerFields('fra1', { autoApprove: true }),
    });
    expect(refusal(added).errors?.[0]?.pointer).toBe('/autoApprove');
  });

  it('PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY=true: the operator trusts every peer, autoApprove holds', async () => {
    h = await withPolicy(await startHarness({ autoApproveWithoutRegistry: true }));
    const added = await h.post('/admin/router', h.admin, {
      action: 'add',
      ...routerFields('fra1', { autoApprove: true }),
    });
    expect((added.json() as { router: { autoApproveHolds: boolean } }).router.autoApproveHolds).toBe(true);
    const created = await expectOk(create(h, 4242423902));
    expect((created.json() as { status: number }).status).toBe(4);
  });
});

describe("with a DN42 registry's route objects", () => {
  it('auto-approves a session on addresses its ASN holds and refuses one on addresses it does not', async () => {
    const registry = await tempDir();
    await cp(FIXTURE, registry, { recursive: true });
    h = await withPolicy(
      await startHarness(
        {},
        { registry: new DirectoryRegistry(registry), serviceHost: 'peering.test', admins: [] },
      ),
    );
    await h.addRouter('fra1', { autoApprove: true });
    const own = await expectOk(create(h, OWNER, { ipv6: 'fd00:abcd:e::1' }));
    expect((own.json() as { status: number }).status).toBe(4);
    const other = await create(h, OWNER, { ipv6: 'fd42:1234::99' });
    expect(refusal(other).errors?.[0]?.pointer).toBe('/ipv6');
  });
});
