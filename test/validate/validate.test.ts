import { execFile } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../cli/validate.ts';

const run = promisify(execFile);
const fixtures = resolve(import.meta.dirname, '../fixtures/validate');
const peerops = resolve(import.meta.dirname, '../../bin/peerops.ts');

async function capture(argv: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  const error = vi
    .spyOn(console, 'error')
    .mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
  try {
    return { code: await main(argv), out, err };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

describe('peerops validate', () => {
  afterEach(() => vi.restoreAllMocks());

  it('passes a clean repository with exit status 0, ok per file and a summary', async () => {
    const { code, out, err } = await capture([join(fixtures, 'good')]);
    expect(code).toBe(0);
    expect(out).toEqual([
      'policy/default.yaml: ok',
      'policy/fra1.yaml: ok',
      'routers/ams1.yaml: ok',
      'routers/fra1.yaml: ok',
      'sessions/ams1/as4242420001.yaml: ok',
      'sessions/ams1/as64512.yaml: ok',
      'sessions/fra1/as4242420001.yaml: ok',
      'peerops validate: ok: 2 router(s), 3 session(s), 2 policy file(s)',
    ]);
    expect(err).toEqual([]);
  });

  it('reports every problem of a bad repository as file: pointer: reason, with exit status 1', async () => {
    // the malformed YAML file is written here: committed, it would trip the repository's format check
    const dir = await mkdtemp(join(tmpdir(), 'peerops-validate-'));
    await cp(join(fixtures, 'bad'), dir, { recursive: true });
    await writeFile(
      join(dir, 'sessions/fra1/as4242420006.yaml'),
      'apiVersion: peerops.dev/v1alpha1\nkind: PeeringSession\nspec: [unclosed\n',
    );
    const {
      code,
      out: all,
      err,
    } = await capture([dir]).finally(() => rm(dir, { recursive: true, force: true }));
    expect(code).toBe(1);
    // problem lines first, then one summary line per file
    const out = all.filter((l) => l.includes(': /'));
    expect(all.slice(0, out.length)).toEqual(out);
    for (const line of out) expect(line).toMatch(/^[a-z0-9/.]+: \/[^:]*: .+$/);
    // a malformed key is said once, by its form (not also by its length)
    expect(all).toContain('sessions/fra1/as4242420005.yaml: 4 problems');
    expect(all).toContain('sessions/fra1/as2.yaml: 1 problem');
    const where = out.map((l) => l.split(': ').slice(0, 2).join(': '));
    expect(where).toEqual([
      'policy/default.yaml: /spec/dn42Asn',
      'routers/ams1.yaml: /spec/nodeId',
      'routers/fra1.yaml: /spec/nodeId',
      'sessions/fra1/as1.yaml: /metadata/name',
      'sessions/fra1/as1.yaml: /spec/asn',
      'sessions/fra1/as2.yaml: /spec',
      'sessions/fra1/as4242420002.yaml: /spec/listenPort',
      'sessions/fra1/as4242420003.yaml: /spec/listenPort',
      'sessions/fra1/as4242420005.yaml: /spec/postUp',
      'sessions/fra1/as4242420005.yaml: /spec/endpoint',
      'sessions/fra1/as4242420005.yaml: /spec/publicKey',
      'sessions/fra1/as4242420005.yaml: /spec/mtu',
      'sessions/fra1/as4242420006.yaml: /',
      'sessions/fra1/as4242420007.yaml: /kind',
      'sessions/fra1/as4242429999.yaml: /spec/asn',
      'sessions/fra1/notes.txt: /',
      'sessions/zzz1/as4242420004.yaml: /spec/router',
    ]);
    expect(out).toContain(
      'sessions/fra1/as1.yaml: /spec/asn: must be 1 for a file at sessions/fra1/as1.yaml',
    );
    expect(out).toContain(
      'sessions/fra1/as2.yaml: /spec: a second session for AS2 on router fra1 (first in sessions/fra1/as1.yaml)',
    );
    expect(out).toContain(
      'sessions/fra1/as4242420003.yaml: /spec/listenPort: port 20002 on router fra1 is already used by session as4242420002-fra1',
    );
    expect(out).toContain("sessions/zzz1/as4242420004.yaml: /spec/router: names an unknown router 'zzz1'");
    expect(out).toContain(
      'sessions/fra1/as4242429999.yaml: /spec/asn: AS4242429999 is blocked by the policy of router fra1',
    );
    expect(out).toContain(
      "policy/default.yaml: /spec/dn42Asn: the default policy must set dn42Asn (the network's own ASN)",
    );
    expect(err).toEqual(['peerops validate: 17 problem(s) in 2 router(s), 5 session(s), 1 policy file(s)']);
  });

  it('flags a repository without a default policy, and one line per hostile file without echoing it raw', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'peerops-validate-'));
    try {
      await cp(join(fixtures, 'good'), dir, { recursive: true });
      await rm(join(dir, 'policy/default.yaml'));
      await writeFile(
        join(dir, 'sessions/fra1/as64513.yaml'),
        'kind: PeeringSession\nspec:\n  asn: "64513\\n; rm -rf /"\n',
      );
      const { code, out } = await capture([dir]);
      expect(code).toBe(1);
      expect(out).toContain('policy/default.yaml: /: is missing: the network needs a default policy');
      expect(out.every((l) => !l.includes('\n'))).toBe(true);
      expect(out.some((l) => l.startsWith('sessions/fra1/as64513.yaml: '))).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("refuses what the API refuses at create: a router's blocked ASN, its own link-local, an IPv4 side without a session, another ASN's address", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'peerops-validate-'));
    try {
      await cp(join(fixtures, 'good'), dir, { recursive: true });
      const policy = join(dir, 'policy/fra1.yaml');
      await writeFile(policy, `${await readFile(policy, 'utf8')}  blockedAsns: [4242420001]\n`);
      const session = join(dir, 'sessions/ams1/as64512.yaml');
      const text = (await readFile(session, 'utf8'))
        .replace(/linkLocal: .*/, 'linkLocal: fe80::2')
        .replace(/ipv6: .*/, 'ipv6: fd42:3121::1');
      await writeFile(session, `${text}  mpbgp: false\n  extendedNextHop: true\n`);
      const { code, out } = await capture([dir]);
      expect(code).toBe(1);
      expect(out).toContain(
        'sessions/fra1/as4242420001.yaml: /spec/asn: AS4242420001 is blocked by the policy of router fra1',
      );
      // the same ASN on ams1, whose policy does not block it, is not refused for its ASN
      expect(out.filter((l) => l.startsWith('sessions/ams1/as4242420001.yaml: /spec/asn'))).toEqual([]);
      expect(out).toContain(
        "sessions/ams1/as64512.yaml: /spec/linkLocal: collides with the router's own link-local fe80::2",
      );
      expect(out).toContain(
        'sessions/ams1/as64512.yaml: /spec/extendedNextHop: extended next hop carries IPv4 over MP-BGP; it needs mpbgp true',
      );
      // AS4242420001's address, which that ASN itself uses on two routers (allowed)
      expect(out).toContain(
        "sessions/ams1/as64512.yaml: /spec/ipv6: is the address of AS4242420001's session as4242420001-ams1",
      );
      // both sides are named; the ASN's own two sessions do not clash with each other
      expect(out.filter((l) => l.includes('as4242420001.yaml: /spec/ipv6'))).toEqual([
        "sessions/ams1/as4242420001.yaml: /spec/ipv6: is the address of AS64512's session as64512-ams1",
        "sessions/fra1/as4242420001.yaml: /spec/ipv6: is the address of AS64512's session as64512-ams1",
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reads policy prefixes as the API does: leading zeros and host bits refused, field by field', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'peerops-validate-'));
    try {
      await cp(join(fixtures, 'good'), dir, { recursive: true });
      const policy = join(dir, 'policy/fra1.yaml');
      await writeFile(
        policy,
        `${await readFile(policy, 'utf8')}  ownPrefixes:\n    ipv4: ['010.0.0.0/8', '172.20.0.0/24']\n    ipv6: ['fd42:4242::1/48', 'fd00:0::/8']\n`,
      );
      const { code, out } = await capture([dir]);
      expect(code).toBe(1);
      expect(out.filter((l) => l.includes('/spec/ownPrefixes'))).toEqual([
        'policy/fra1.yaml: /spec/ownPrefixes/ipv4/0: must be an IPv4 prefix such as 172.20.0.0/14: four decimal numbers 0-255 without leading zeros, / and a length 0-32',
        'policy/fra1.yaml: /spec/ownPrefixes/ipv6/0: has bits set after /48: the network is fd42:4242::/48 (or give a longer length)',
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('prints help, and refuses unknown options with exit status 2', async () => {
    const help = await capture(['--help']);
    expect(help.code).toBe(0);
    expect(help.out.join('\n')).toMatch(
      /usage: peerops validate \[--base <ref>\] \[--format text\|github\|json\] \[dir\]/,
    );
    expect((await capture(['--frobnicate'])).code).toBe(2);
    expect((await capture(['a', 'b'])).code).toBe(2);
    expect((await capture(['--format', 'xml', '.'])).code).toBe(2);
    expect((await capture(['--base'])).code).toBe(2);
    // a mistyped directory is said as such, not reported as a repository without a default policy
    const missing = await capture([join(tmpdir(), 'peerops-validate-no-such-dir')]);
    expect(missing.code).toBe(2);
    expect(missing.err.join('\n')).toMatch(/cannot read .*no-such-dir: ENOENT/);
  });

  it('runs as `peerops validate` in a checkout, as a CI step would (default dir: the current one)', async () => {
    const ok = await run(process.execPath, [peerops, 'validate'], { cwd: join(fixtures, 'good') });
    expect(ok.stdout).toMatch(/^peerops validate: ok: /m);
    await expect(run(process.execPath, [peerops, 'validate', join(fixtures, 'bad')])).rejects.toMatchObject({
      code: 1,
    });
  });
});
