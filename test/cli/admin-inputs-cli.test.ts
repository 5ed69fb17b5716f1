/**
 * The admin CLI for issue 24's admin inputs, as child processes against a listening controller: session
 * purge, policy set (replaces; takes what get --json prints) and patch, router remove and update.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, driver, expectOk, startHarness, type Harness } from '../api/helpers.ts';
import { runCli } from './run.ts';

let h: Harness;
let url: string;
let home: string;

/** `peerops …` with the admin token; exit status, stdout, stderr. */
const peerops = (args: string[]) => runCli(args, { url, home, token: h.admin });

async function file(name: string, content: unknown): Promise<string> {
  const path = join(home, name);
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

const stored = (name = 'default') => h.store.getPolicy(name)?.spec;

beforeAll(async () => {
  h = await startHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  home = await mkdtemp(join(tmpdir(), 'peerops-cli-admin-'));
  await h.addRouter('fra1');
  await expectOk(
    h.post('/admin/policy', h.admin, {
      action: 'set',
      spec: {
        dn42Asn: ADMIN_ASN,
        rpkiServers: [{ host: 'rpki.example.net', port: 8282 }],
        blockedAsns: [64512],
      },
    }),
  );
});
afterAll(async () => {
  await h?.close();
  await rm(home, { recursive: true, force: true });
});

describe('peerops admin policy', () => {
  it('get --json is valid set --spec input: the policy comes back unchanged, and set says it replaced', async () => {
    const before = stored();
    const got = await peerops(['admin', 'policy', 'get', '--json']);
    expect(got.code, got.stderr).toBe(0);
    const saved = await file('policy.json', got.stdout);
    const set = await peerops(['admin', 'policy', 'set', '--spec', saved]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout.trim().split('\n')).toEqual([
      `policy default replaced by ${saved}: set replaces the whole policy`,
      'no stored field was removed',
    ]);
    expect(stored()).toEqual(before);
    // and a bare spec, as before
    const bare = await file('bare.json', JSON.parse(got.stdout).spec);
    expect((await peerops(['admin', 'policy', 'set', '--spec', bare])).code).toBe(0);
    expect(stored()).toEqual(before);
  });
  it('set --spec names the fields the file left out, which are gone', async () => {
    const spec = await file('small.json', { dn42Asn: ADMIN_ASN });
    const set = await peerops(['admin', 'policy', 'set', '--spec', spec]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toContain('removed (not in the file): rpkiServers, blockedAsns');
    expect(stored()).toEqual({ dn42Asn: ADMIN_ASN, mergeIsApproval: false });
  });
  it('set refuses a default policy without dn42Asn, naming the flag; nothing changes', async () => {
    const before = stored();
    const spec = await file('noasn.json', { blockedAsns: [64513] });
    const set = await peerops(['admin', 'policy', 'set', '--spec', spec]);
    expect(set.code).toBe(1);
    expect(set.stderr).toMatch(
      /^INVALID_REQUEST: policy default \/spec\/dn42Asn \(--dn42-asn\): the default policy must set dn42Asn/,
    );
    expect(stored()).toEqual(before);
  });
  it('a get --json file of another policy than --router names is a usage error', async () => {
    const got = await peerops(['admin', 'policy', 'get', '--json']);
    const saved = await file('default.json', got.stdout);
    const set = await peerops(['admin', 'policy', 'set', '--router', 'fra1', '--spec', saved]);
    expect(set.code).toBe(2);
    expect(set.stderr).toContain(`USAGE: --spec ${saved} holds policy default, not fra1 (--router)`);
    const wrong = await file('wrong.json', { name: 'default', spec: {}, extra: 1 });
    expect((await peerops(['admin', 'policy', 'set', '--spec', wrong])).code).toBe(2);
  });
  it('patch merges flags and a merge patch file into the stored policy', async () => {
    const flags = await peerops(['admin', 'policy', 'patch', '--max-pending', '2', '--block', '64999']);
    expect(flags.code, flags.stderr).toBe(0);
    expect(flags.stdout.trim()).toBe('policy default patched: blockedAsns, maxPendingPerAsn');
    expect(stored()).toEqual({
      dn42Asn: ADMIN_ASN,
      mergeIsApproval: false,
      maxPendingPerAsn: 2,
      blockedAsns: [64999],
    });
    const patch = await file('patch.json', { maxPendingPerAsn: null, communities: { bandwidth: 24 } });
    const res = await peerops(['admin', 'policy', 'patch', '--spec', patch, '--json']);
    expect(res.code, res.stderr).toBe(0);
    const expected = {
      dn42Asn: ADMIN_ASN,
      mergeIsApproval: false,
      blockedAsns: [64999],
      communities: { bandwidth: 24, enabled: true },
    };
    expect(JSON.parse(res.stdout)).toEqual({ name: 'default', spec: expected });
    expect(stored()).toEqual(expected);
    const drop = await peerops([
      'admin',
      'policy',
      'patch',
      '--spec',
      await file('drop.json', { dn42Asn: null }),
    ]);
    expect(drop.code).toBe(1);
    expect(drop.stderr).toMatch(/^INVALID_REQUEST: /);
    expect(stored()).toEqual(expected);
    const none = await peerops(['admin', 'policy', 'patch']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/policy patch needs --spec FILE or a field/);
  });
});

describe('peerops admin session purge and router remove', () => {
  it('remove prints the sessions that hold the router; purge needs a reason, then removes the stuck one', async () => {
    const token = await h.addRouter('stuck1');
    const d = driver(h, 'stuck1', token);
    const uuid = await d.inStatus(5);
    const name = h.store.getSession(uuid)?.name;
    const remove = await peerops(['admin', 'router', 'remove', 'stuck1']);
    expect(remove.code).toBe(1);
    expect(remove.stderr.trim()).toBe(
      `INVALID_STATE: router stuck1 still has 1 session: ${name} ${uuid} (QUEUED_FOR_DELETE). The one in ` +
        "QUEUED_FOR_DELETE waits for the router's agent to tear it down: if it will not, purge it " +
        '(peerops admin session purge UUID --reason TEXT)',
    );
    const noReason = await peerops(['admin', 'session', 'purge', uuid]);
    expect(noReason.code).toBe(2);
    expect(noReason.stderr.trim()).toBe('USAGE: purge needs --reason TEXT');
    expect(d.status(uuid)).toBe(5);
    const purge = await peerops(['admin', 'session', 'purge', uuid, '--reason', 'router reinstalled']);
    expect(purge.code, purge.stderr).toBe(0);
    // the record stays, PURGED with the reason, for its owner to read (docs/api.md, Decisions)
    expect(purge.stdout.trim()).toBe(`session ${uuid}: PURGED`);
    expect(h.store.getSession(uuid)?.status).toMatchObject({
      code: 8,
      decision: { action: 'purge', reason: 'router reinstalled' },
    });
    // a purged record holds nothing on the router: removing the router removes it too
    expect((await peerops(['admin', 'router', 'remove', 'stuck1'])).code).toBe(0);
    expect(h.store.getSession(uuid)).toBeUndefined();
  });
  it('purge of a session in another status is INVALID_STATE', async () => {
    const d = driver(h, 'fra1', '');
    const uuid = await d.create();
    const res = await peerops(['admin', 'session', 'purge', uuid, '--reason', 'x']);
    expect(res.code).toBe(1);
    expect(res.stderr.trim()).toBe(
      'INVALID_STATE: purge is not allowed for a session in status 3 (PENDING_REVIEW)',
    );
    expect(d.status(uuid)).toBe(3);
  });
});

describe('peerops admin router update', () => {
  it('one loopback flag keeps the other family; uuid in --spec is refused', async () => {
    await h.addRouter('lo2', { loopback: { ipv4: '172.20.9.1', ipv6: 'fd00:9::1' } });
    const res = await peerops(['admin', 'router', 'update', 'lo2', '--loopback-ipv4', '172.20.9.2']);
    expect(res.code, res.stderr).toBe(0);
    expect(h.store.getRouter('lo2')?.spec.loopback).toEqual({ ipv4: '172.20.9.2', ipv6: 'fd00:9::1' });
    const uuid = await file('uuid.json', { uuid: '6f7b3f2a-1111-4222-8333-444455556666' });
    const refused = await peerops(['admin', 'router', 'update', 'lo2', '--spec', uuid]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^INVALID_REQUEST: update \/spec\/uuid: cannot change/);
  });
  it('--clear removes optional fields and one loopback family; a field every router has is refused', async () => {
    await h.addRouter('clr2', {
      loopback: { ipv4: '172.20.9.5', ipv6: 'fd00:9::5' },
      location: 'Frankfurt',
      maxSessions: 7,
      dn42Region: 'eu',
    });
    const res = await peerops([
      'admin',
      'router',
      'update',
      'clr2',
      '--clear',
      'location',
      '--clear',
      'max-sessions',
      '--clear',
      'dn42-region',
      '--clear',
      'loopback-ipv4',
    ]);
    expect(res.code, res.stderr).toBe(0);
    const spec = h.store.getRouter('clr2')?.spec;
    expect(spec?.loopback).toEqual({ ipv6: 'fd00:9::5' });
    for (const field of ['location', 'maxSessions', 'dn42Region']) expect(spec).not.toHaveProperty(field);
    const unknown = await peerops(['admin', 'router', 'update', 'clr2', '--clear', 'endpoint-host']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown --clear 'endpoint-host'");
    const required = await file('required.json', { endpointHost: null });
    const refused = await peerops(['admin', 'router', 'update', 'clr2', '--spec', required]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      '/spec/endpointHost (--endpoint-host): cannot be cleared: every router has one',
    );
  });
});
