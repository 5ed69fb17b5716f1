/**
 * `peerops session list --watch` (docs/cli.md): the list, then a line for each change as the controller
 * streams it (docs/api.md, Live updates), run as a user runs it against a listening controller; it ends
 * with the controller's reason when the token is revoked.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_ASN, driver, expectOk, startHarness, USER_ASN, type Harness } from '../api/helpers.ts';
import { runCli } from './run.ts';

let h: Harness;
let url: string;
let home: string;
let agentToken: string;
let d: ReturnType<typeof driver>;

beforeAll(async () => {
  h = await startHarness();
  agentToken = await h.addRouter('fra1');
  d = driver(h, 'fra1', agentToken);
  await expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN } }));
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  home = await mkdtemp(join(tmpdir(), 'peerops-cli-watch-'));
});
afterAll(async () => {
  await h?.close();
  await rm(home, { recursive: true, force: true });
});

/** `peerops session list --watch` running, with what it printed so far and a wait for a line. */
function watch(token: string) {
  const child = spawn(process.execPath, ['bin/peerops.ts', 'session', 'list', '--watch'], {
    env: { ...process.env, PEEROPS_URL: url, PEEROPS_CONFIG_DIR: join(home, 'config'), PEEROPS_TOKEN: token },
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (b: Buffer) => (out.stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out.stderr += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const printed = async (pattern: RegExp, ms = 20_000): Promise<number> => {
    const start = performance.now();
    while (!pattern.test(out.stdout)) {
      if (performance.now() - start > ms)
        throw new Error(`not printed within ${ms} ms: ${pattern}\n${out.stdout}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    return performance.now();
  };
  return { child, out, exited, printed };
}

describe('peerops session list --watch', () => {
  it("prints the list, then each change the agent reports, and ends with the token's revocation", async () => {
    const { token } = h.tokens.issueToken(USER_ASN, 'user');
    const uuid = await d.create(token);
    const w = watch(token);
    try {
      await w.printed(new RegExp(`${uuid}\\s+fra1\\s+${USER_ASN}\\s+PENDING_REVIEW`));
      // the stream's first list is the one printed: no change line for it
      await new Promise((r) => setTimeout(r, 500));
      expect(w.out.stdout).not.toMatch(/ -> /);

      await expectOk(d.admin('approve', uuid));
      await w.printed(new RegExp(`${uuid}  fra1  AS${USER_ASN}  status PENDING_REVIEW -> QUEUED_FOR_SETUP`));
      const reported = performance.now();
      await expectOk(d.reportBgp(uuid, 1, 'Established'));
      const seen = await w.printed(/status QUEUED_FOR_SETUP[^\n]* -> ACTIVE, bgp [^\n]*-> Established/);
      expect(seen - reported).toBeLessThan(2000);
      // one line per change, each stamped with the time to the second
      expect(w.out.stdout.trim().split('\n').slice(-2)).toEqual([
        expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ {2}.* -> QUEUED_FOR_SETUP/),
        expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ {2}.* -> ACTIVE, bgp .* -> Established$/),
      ]);

      await expectOk(h.post('/token', token, { action: 'revoke' }));
      expect(await w.exited).toBe(1);
      expect(w.out.stderr).toContain('INVALID_TOKEN: the token was revoked; log in again');
    } finally {
      w.child.kill();
    }
  });

  it('takes --watch with list only', async () => {
    const show = await runCli(['session', 'show', 'abc', '--watch'], { url, home, token: h.user });
    expect(show.code).toBe(2);
    expect(show.stderr).toContain('--watch goes with list only');
  });
});
