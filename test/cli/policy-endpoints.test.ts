/**
 * `peerops admin policy set --[no-]allow-private-endpoints` (docs/routing-policy.md, Private endpoints),
 * as a child process against a listening controller: the flag reaches the stored policy, keeps the rest
 * of it, and the two flags together are a usage error; --[no-]review-key-changes likewise.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, expectOk, startHarness, type Harness } from '../api/helpers.ts';
import { runCli } from './run.ts';

let h: Harness;
let url: string;
let home: string;

const peerops = (args: string[]) => runCli(args, { url, home, token: h.admin });

beforeAll(async () => {
  h = await startHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  home = await mkdtemp(join(tmpdir(), 'peerops-cli-endpoints-'));
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
});
afterAll(async () => {
  await h?.close();
  if (home) await rm(home, { recursive: true, force: true });
});

describe('admin policy set --allow-private-endpoints', () => {
  it('sets and clears the field, keeping the rest of the policy', async () => {
    const on = await peerops(['admin', 'policy', 'set', '--allow-private-endpoints']);
    expect(on).toMatchObject({ code: 0, stdout: 'policy default saved\n' });
    expect(h.store.getPolicy('default')?.spec).toMatchObject({
      dn42Asn: ADMIN_ASN,
      allowPrivateEndpoints: true,
    });
    const shown = await peerops(['admin', 'policy', 'get']);
    expect(shown.stdout).toMatch(/^allowPrivateEndpoints\s+true$/m);

    const off = await peerops(['admin', 'policy', 'set', '--no-allow-private-endpoints']);
    expect(off.code).toBe(0);
    expect(h.store.getPolicy('default')?.spec).toMatchObject({
      dn42Asn: ADMIN_ASN,
      allowPrivateEndpoints: false,
    });
  });

  it('refuses both flags at once', async () => {
    const both = await peerops([
      'admin',
      'policy',
      'set',
      '--allow-private-endpoints',
      '--no-allow-private-endpoints',
    ]);
    expect(both.code).not.toBe(0);
    expect(both.stderr).toMatch(/give --allow-private-endpoints or --no-allow-private-endpoints, not both/);
  });
});

describe('admin policy patch --review-key-changes', () => {
  it('sets and clears the field (docs/api.md, modify), keeping the rest of the policy', async () => {
    const on = await peerops(['admin', 'policy', 'patch', '--review-key-changes']);
    expect(on.code, on.stderr).toBe(0);
    expect(h.store.getPolicy('default')?.spec).toMatchObject({ dn42Asn: ADMIN_ASN, reviewKeyChanges: true });
    const off = await peerops(['admin', 'policy', 'patch', '--no-review-key-changes']);
    expect(off.code, off.stderr).toBe(0);
    expect(h.store.getPolicy('default')?.spec).toMatchObject({ dn42Asn: ADMIN_ASN, reviewKeyChanges: false });
    const both = await peerops([
      'admin',
      'policy',
      'patch',
      '--review-key-changes',
      '--no-review-key-changes',
    ]);
    expect(both.stderr).toMatch(/give --review-key-changes or --no-review-key-changes, not both/);
  });
});
