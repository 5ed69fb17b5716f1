/**
 * `peerops admin token` prints the id of the token it mints, and `admin token revoke|list` drive
 * POST /admin/token (docs/cli.md; docs/login.md, Revoking tokens): the real CLI against a controller
 * listening on loopback.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OTHER_ASN, USER_ASN, startHarness, type Harness } from '../api/helpers.ts';
import { runCli } from './run.ts';

let h: Harness;
let url: string;
let home: string;

const peerops = (args: string[], token?: string) => runCli(args, { url, home, token });

/** A user request with `token`: its HTTP status. */
async function statusWith(token: string): Promise<number> {
  return (await h.post('/session', token, { action: 'list' })).statusCode;
}

beforeAll(async () => {
  h = await startHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  home = await mkdtemp(join(tmpdir(), 'peerops-cli-token-'));
});
afterAll(async () => {
  await h?.close();
  await rm(home, { recursive: true, force: true });
});

describe('peerops admin token', () => {
  it('mints a token and prints its id on stderr; revoke ID ends that token alone', async () => {
    const minted = await peerops(['admin', 'token', '--data', h.dir, '--asn', String(USER_ASN)]);
    expect(minted.code).toBe(0);
    const token = minted.stdout.trim();
    const id = /token id (\S+)/.exec(minted.stderr)?.[1] ?? '';
    expect(id).toMatch(new RegExp(`^${USER_ASN}\\.\\d+\\.[A-Za-z0-9_-]{16}$`));
    const json = await peerops(['admin', 'token', '--data', h.dir, '--asn', String(USER_ASN), '--json']);
    const other = JSON.parse(json.stdout) as { token: string; id: string };
    expect(other.id).not.toBe(id);
    expect(await statusWith(token)).toBe(200);

    const revoked = await peerops(['admin', 'token', 'revoke', id], h.admin);
    expect(revoked).toMatchObject({ code: 0, stdout: `token ${id} of AS${USER_ASN} revoked\n` });
    expect(await statusWith(token)).toBe(401);
    expect(await statusWith(other.token)).toBe(200);

    const list = await peerops(['admin', 'token', 'list', '--json'], h.admin);
    expect((JSON.parse(list.stdout) as { tokens: { id: string }[] }).tokens.map((t) => t.id)).toEqual([id]);
  });

  it('revoke --asn N ends every token of that ASN; list shows it', async () => {
    const before = h.tokens.issueToken(OTHER_ASN, 'user').token;
    const res = await peerops(['admin', 'token', 'revoke', '--asn', `AS${OTHER_ASN}`], h.admin);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(new RegExp(`^every token of AS${OTHER_ASN} issued until \\S+ revoked\\n$`));
    expect(await statusWith(before)).toBe(401);
    const list = await peerops(['admin', 'token', 'list'], h.admin);
    expect(list.stdout).toMatch(new RegExp(`every token issued until \\S+\\s+${OTHER_ASN}`));
  });

  it('refuses revoke with neither or both of an id and --asn (usage, exit 2), and a user token (exit 1)', async () => {
    const neither = await peerops(['admin', 'token', 'revoke'], h.admin);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toContain('token revoke needs a token id or --asn N');
    const both = await peerops(['admin', 'token', 'revoke', 'x', '--asn', '1'], h.admin);
    expect(both.code).toBe(2);
    const bad = await peerops(['admin', 'token', 'revoke', 'not-an-id'], h.admin);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/\/id/);
    const user = await peerops(['admin', 'token', 'revoke', '--asn', '1'], h.user);
    expect(user.code).toBe(1);
    expect(user.stderr).toContain('FORBIDDEN');
  });
});
