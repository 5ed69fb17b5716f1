/**
 * Registry rules as DN42 defines them (docs/login.md, Route objects), against fixtures in the real registry's
 * format (test/fixtures/dn42-registry: its filter.txt and filter6.txt, its anycast DNS and filter-test
 * route objects as the registry holds them, nested objects written as it writes them): an address is the
 * origin's of the most specific covering route object the filter permits; anycast objects give no one
 * their addresses; the filter's deny lines and lengths decide which objects count. Read from a checkout
 * and from a git mirror over HTTP.
 */
import { cp, mkdir, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILTIN_FILTER, filterRuleFor, parseFilter } from '../../common/dn42-filter.ts';
import { isProblem } from '../../common/errors.ts';
import { DirectoryRegistry, GitRegistry, UsersFileRegistry } from '../../controller/auth/login/registry.ts';
import { RegistryFilter } from '../../controller/registry/filter.ts';
import { readFilter, routeObjectErrors, routesCovering } from '../../controller/registry/routes.ts';
import { serveGit, type GitHttpServer } from '../support/git-http.ts';
import { run, tempDir } from './support.ts';

const FIXTURE = path.join(import.meta.dirname, '..', 'fixtures', 'dn42-registry');
const A = 4242420101; // fd00:abcd:e::/48, 172.20.16.0/22
const B = 4242420102; // fd00:abcd:e:100::/56 and 172.20.17.0/26 inside A's; fd00:abcd:e:300::/72, too long
const C = 4242420103; // fd00:abcd::/40 and 172.20.32.0/20: lengths the filter denies
const D = 4242420104; // 172.22.166.0/24: the filter-test prefix
const NESTED = "is AS4242420102's: route6 fd00:abcd:e:100::/56 is the most specific route object covering it";

let dir: string;
let reg: DirectoryRegistry;

beforeAll(async () => {
  dir = await tempDir('registry-routes');
  reg = new DirectoryRegistry(FIXTURE);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The errors of one address: `/ipv6` or `/ipv4` by its family. */
async function errorsFor(asn: number, address: string, registry: DirectoryRegistry | GitRegistry = reg) {
  const spec = address.includes(':') ? { ipv6: address } : { ipv6: 'fd00:abcd:e::1', ipv4: address };
  const errors = await routeObjectErrors(registry, asn, spec);
  return errors
    .filter((e) => e.pointer === (address.includes(':') ? '/ipv6' : '/ipv4'))
    .map((e) => e.message);
}

describe("the registry's filter.txt and filter6.txt", () => {
  it('parses the real files, sorted by number, and the built-in copy is the same', async () => {
    const v4 = parseFilter(await readFile(path.join(FIXTURE, 'data', 'filter.txt'), 'utf8'), 'ipv4');
    const v6 = parseFilter(await readFile(path.join(FIXTURE, 'data', 'filter6.txt'), 'utf8'), 'ipv6');
    expect(v4.map((r) => `${r.nr} ${r.action} ${r.prefix} ${r.minLength}-${r.maxLength}`)).toEqual([
      '1 deny 172.22.166.0/24 24-32',
      '1001 permit 172.20.0.0/24 28-32',
      '1002 permit 172.21.0.0/24 28-32',
      '1003 permit 172.22.0.0/24 28-32',
      '1004 permit 172.23.0.0/24 28-32',
      '1100 permit 172.20.0.0/14 21-29',
      '2001 permit 10.100.0.0/14 14-32',
      '2002 permit 10.127.0.0/16 16-32',
      '2003 permit 10.0.0.0/8 15-24',
      '3001 permit 172.31.0.0/16 16-32',
      '9999 deny 0.0.0.0/0 0-32',
    ]);
    expect(v6.map((r) => `${r.nr} ${r.action} ${r.prefix} ${r.minLength}-${r.maxLength}`)).toEqual([
      '10 deny fdd6:6302:7c04::/48 48-128',
      '1001 permit fd00::/8 44-64',
      '9999 deny ::/0 0-128',
    ]);
    expect(BUILTIN_FILTER).toEqual({ ipv4: v4, ipv6: v6 });
    // the number orders the lines, not their place in the file
    expect(
      parseFilter('20 permit fd00::/8 8 64\n10 deny fd00::/16 16 128\n', 'ipv6').map((r) => r.nr),
    ).toEqual([10, 20]);
  });

  it('refuses a line that is not exactly a rule, naming the file, the line and why', () => {
    const cases: [string, RegExp][] = [
      ['0001 allow 10.0.0.0/8 8 32', /filter\.txt line 2: the action 'allow' is neither permit nor deny/],
      ['0001 permit 10.0.0.0/8 8', /line 2: expected 'nr action prefix minlen maxlen', got 4 fields/],
      ['0001 permit 10.1.0.0/8 8 32', /line 2: the prefix '10\.1\.0\.0\/8' has bits set after \/8/],
      ['0001 permit 10.0.0.0/8 4 32', /line 2: minlen 4 is shorter than the prefix's \/8/],
      ['0001 permit 10.0.0.0/8 24 16', /line 2: maxlen 16 is shorter than minlen 24/],
      ['0001 permit 10.0.0.0/8 8 33', /line 2: maxlen '33' is not a length 0-32/],
      ['x1 permit 10.0.0.0/8 8 32', /line 2: the number 'x1' is not a number/],
      ['0001 permit fd00::/8 8 64', /line 2: the prefix 'fd00::\/8' must be an IPv4 prefix/],
      ['0001 permit 10.0.0.0/8 8 32 ; route 0.0.0.0/0', /line 2: expected .* got 8 fields/],
    ];
    for (const [line, error] of cases)
      expect(() => parseFilter(`# header\n${line}\n`, 'ipv4'), line).toThrow(error);
  });

  it('decides a prefix by the first line that holds it and its length', () => {
    const rule = (prefix: string) => {
      const r = filterRuleFor(prefix.includes(':') ? BUILTIN_FILTER.ipv6 : BUILTIN_FILTER.ipv4, prefix);
      return r && `${r.nr} ${r.action}`;
    };
    expect(rule('172.22.166.0/24')).toBe('1 deny');
    expect(rule('172.22.166.128/25')).toBe('1 deny');
    expect(rule('172.20.0.53/32')).toBe('1001 permit');
    expect(rule('172.20.16.0/22')).toBe('1100 permit');
    expect(rule('172.20.32.0/20')).toBe('9999 deny'); // shorter than 1100's /21
    expect(rule('172.20.1.0/30')).toBe('9999 deny'); // longer than /29 outside the anycast /24s
    expect(rule('fdd6:6302:7c04::/64')).toBe('10 deny');
    expect(rule('fd00:abcd:e:100::/56')).toBe('1001 permit');
    expect(rule('fd00:abcd::/40')).toBe('9999 deny');
    expect(filterRuleFor([], '172.20.0.0/24')).toBeUndefined();
  });
});

describe('whose an address is (a checkout of the registry)', () => {
  it('lists every covering object, least specific first, with the filter line deciding it', async () => {
    const files = await reg.files();
    const objects = await routesCovering(files, await readFilter(files), 'fd00:abcd:e:100::1');
    expect(objects.map((o) => [o.prefix, o.origins, o.rule?.nr, o.rule?.action])).toEqual([
      ['fd00:abcd::/40', [C], 9999, 'deny'],
      ['fd00:abcd:e::/48', [A], 1001, 'permit'],
      ['fd00:abcd:e:100::/56', [B], 1001, 'permit'],
    ]);
  });

  it('the most specific object wins: a /56 of B inside the /48 of A is B’s', async () => {
    expect(await errorsFor(A, 'fd00:abcd:e::1')).toEqual([]);
    expect(await errorsFor(A, 'fd00:abcd:e:200::1')).toEqual([]); // past the /56
    expect(await errorsFor(A, 'fd00:abcd:e:100::1')).toEqual([
      `fd00:abcd:e:100::1 ${NESTED} (your route6 fd00:abcd:e::/48 is less specific)`,
    ]);
    expect(await errorsFor(B, 'fd00:abcd:e:100::1')).toEqual([]);
    expect(await errorsFor(B, 'fd00:abcd:e::1')).toEqual([
      "fd00:abcd:e::1 is AS4242420101's: route6 fd00:abcd:e::/48 is the most specific route object covering it",
    ]);
    // IPv4 alike
    expect(await errorsFor(A, '172.20.16.1')).toEqual([]);
    expect(await errorsFor(A, '172.20.17.9')).toEqual([
      "172.20.17.9 is AS4242420102's: route 172.20.17.0/26 is the most specific route object covering it (your route 172.20.16.0/22 is less specific)",
    ]);
    expect(await errorsFor(B, '172.20.17.9')).toEqual([]);
  });

  it('an anycast object (several origins) gives its addresses to none of them', async () => {
    // the registry's own anycast DNS objects
    expect(await errorsFor(4242420119, '172.20.0.53')).toEqual([
      "172.20.0.53 is an anycast address: route 172.20.0.53/32 has origins AS4242420119, AS4242423914, and a tunnel address must be one network's own",
    ]);
    expect(await errorsFor(4242422601, '172.23.0.53')).toEqual([
      "172.23.0.53 is an anycast address: route 172.23.0.53/32 has origins AS64737, AS4242422601, AS4242421080, and a tunnel address must be one network's own",
    ]);
    expect(await errorsFor(64737, 'fd42:d42:d42:53::1')).toEqual([
      "fd42:d42:d42:53::1 is an anycast address: route6 fd42:d42:d42:53::/64 has origins AS64737, AS4242422601, AS4242421080, and a tunnel address must be one network's own",
    ]);
    // …even where the less specific object is the asker's alone
    expect(await errorsFor(64737, 'fd42:d42:d42:54::1')).toEqual([
      "fd42:d42:d42:54::1 is an anycast address: route6 fd42:d42:d42:54::/64 has origins AS4242420119, AS4242423914, and a tunnel address must be one network's own",
    ]);
    expect(await errorsFor(A, 'fd00:abcd:a::1')).toEqual([
      "fd00:abcd:a::1 is an anycast address: route6 fd00:abcd:a::/48 has origins AS4242420101, AS4242420102, and a tunnel address must be one network's own",
    ]);
  });

  it('an object the filter denies (its deny lines, or a length no permit line takes) does not count', async () => {
    expect(await errorsFor(C, 'fd00:abcd:f0::1')).toEqual([
      "no route6 object in the registry gives fd00:abcd:f0::1 to AS4242420103 (route6 fd00:abcd::/40 (AS4242420103, denied by line 9999 of the registry's filter6.txt, does not count))",
    ]);
    expect(await errorsFor(C, '172.20.33.1')).toEqual([
      "no route object in the registry gives 172.20.33.1 to AS4242420103 (route 172.20.32.0/20 (AS4242420103, denied by line 9999 of the registry's filter.txt, does not count))",
    ]);
    expect(await errorsFor(D, '172.22.166.1')).toEqual([
      "no route object in the registry gives 172.22.166.1 to AS4242420104 (route 172.22.166.0/24 (AS4242420104, denied by line 0001 of the registry's filter.txt, does not count))",
    ]);
    // the registry's filter-test objects, as it holds them
    expect(await errorsFor(4242422923, 'fdd6:6302:7c04::1')).toEqual([
      "no route6 object in the registry gives fdd6:6302:7c04::1 to AS4242422923 (route6 fdd6:6302:7c04::/48 (AS4242422923, AS4201272923, denied by line 0010 of the registry's filter6.txt, does not count); route6 fdd6:6302:7c04::/64 (AS4242422923, AS4201272923, denied by line 0010 of the registry's filter6.txt, does not count))",
    ]);
    // and a denied more specific object leaves the address to the object that counts
    expect(await errorsFor(A, 'fd00:abcd:e:300::1')).toEqual([]);
  });

  it("reads the registry's filter, a family without its file from the built-in copy, and refuses one that does not parse", async () => {
    const copy = path.join(dir, 'copy');
    await cp(FIXTURE, copy, { recursive: true });
    const files = () => new DirectoryRegistry(copy).files();
    await writeFile(
      path.join(copy, 'data', 'filter6.txt'),
      '0005 deny fd00:abcd::/32 32 128 # ours\n1001 permit fd00::/8 44 64\n',
    );
    await unlink(path.join(copy, 'data', 'filter.txt'));
    const warned: string[] = [];
    const feed = new RegistryFilter(
      new DirectoryRegistry(copy),
      { warn: (o) => warned.push(JSON.stringify(o)) },
      0,
    );
    const filter = await readFilter(await files());
    expect(filter.ipv4).toEqual(BUILTIN_FILTER.ipv4);
    expect(filter.ipv6.map((r) => r.nr)).toEqual([5, 1001]);
    expect(await feed.sent()).toEqual(filter); // not the built-in copy: sent to the agents
    // the registry's deny line now takes A's /48 from it
    expect(await errorsFor(A, 'fd00:abcd:e::1', new DirectoryRegistry(copy))).toEqual([
      "no route6 object in the registry gives fd00:abcd:e::1 to AS4242420101 (route6 fd00:abcd::/40 (AS4242420103, denied by line 0005 of the registry's filter6.txt, does not count); route6 fd00:abcd:e::/48 (AS4242420101, denied by line 0005 of the registry's filter6.txt, does not count))",
    ]);
    await writeFile(path.join(copy, 'data', 'filter6.txt'), '0005 deny fd00:abcd::/32 32\n');
    const err = await readFilter(await files()).catch((e: unknown) => e);
    expect(isProblem(err, 'REGISTRY_UNAVAILABLE')).toBe(true);
    expect((err as Error).message).toBe(
      "the registry's data/filter6.txt line 1: expected 'nr action prefix minlen maxlen', got 4 fields",
    );
    // …and the filter sent to the agents stays the last good one, the reason logged once
    expect(await feed.sent()).toEqual(filter);
    expect(await feed.sent()).toEqual(filter);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain('filter6.txt line 1');
    // a registry whose filter never read well sends nothing: the agents' built-in copy applies
    expect(
      await new RegistryFilter(new DirectoryRegistry(copy), { warn: () => {} }, 0).sent(),
    ).toBeUndefined();
  });

  it('two files naming one prefix make one object of both origins: no one holds it alone', async () => {
    const copy = path.join(dir, 'twice');
    await cp(FIXTURE, copy, { recursive: true });
    // a file whose name says /57 and whose object says B's /56 again, with another origin
    await writeFile(
      path.join(copy, 'data', 'route6', 'fd00:abcd:e:100::_57'),
      'route6:             fd00:abcd:e:100::/56\norigin:             AS4242420103\n',
    );
    expect(await errorsFor(B, 'fd00:abcd:e:100::1', new DirectoryRegistry(copy))).toEqual([
      "fd00:abcd:e:100::1 is an anycast address: route6 fd00:abcd:e:100::/56 has origins AS4242420102, AS4242420103, and a tunnel address must be one network's own",
    ]);
  });

  it('a users file checks no address; a checkout without data/ is REGISTRY_UNAVAILABLE', async () => {
    const file = path.join(dir, 'users');
    await writeFile(file, `AS${A}: pgp-fingerprint ${'0'.repeat(40)}\n`);
    const users = new UsersFileRegistry(file);
    await users.start();
    expect(await routeObjectErrors(users, B, { ipv6: 'fd00:abcd:e::1' })).toEqual([]);
    const err = await routeObjectErrors(new DirectoryRegistry(path.join(dir, 'nowhere')), A, {
      ipv6: 'fd00:abcd:e::1',
    }).catch((e: unknown) => e);
    expect(isProblem(err, 'REGISTRY_UNAVAILABLE')).toBe(true);
  });
});

describe('whose an address is (a git mirror over HTTP)', () => {
  let server: GitHttpServer;
  let work: string;
  let url: string;
  const git = (...args: string[]) => run('git', ['-C', work, ...args]);

  beforeAll(async () => {
    const served = path.join(dir, 'served');
    await mkdir(served, { recursive: true });
    await run('git', ['init', '-q', '--bare', '-b', 'master', path.join(served, 'registry.git')]);
    work = path.join(dir, 'work');
    await cp(FIXTURE, work, { recursive: true });
    await run('git', ['init', '-q', '-b', 'master', work]);
    await git('config', 'user.email', 'test@example.test');
    await git('config', 'user.name', 'test');
    await git('add', '-A');
    await git('commit', '-q', '-m', 'registry');
    await git('push', '-q', path.join(served, 'registry.git'), 'master');
    server = await serveGit(served);
    url = `${server.url}/registry.git`;
  });
  afterAll(async () => server?.close());

  it('reads objects and filter at the last good commit, and follows a change after a refresh', async () => {
    const mirror = new GitRegistry({ url, cacheDir: path.join(dir, 'cache'), refreshIntervalMs: 0 });
    try {
      await mirror.start();
      expect(await errorsFor(A, 'fd00:abcd:e:100::1', mirror)).toEqual([
        `fd00:abcd:e:100::1 ${NESTED} (your route6 fd00:abcd:e::/48 is less specific)`,
      ]);
      expect(await errorsFor(4242420119, '172.20.0.53', mirror)).toHaveLength(1);
      expect(await errorsFor(D, '172.22.166.1', mirror)).toHaveLength(1);
      // the registry's files are the built-in copy: nothing to send
      const feed = new RegistryFilter(mirror, { warn: () => {} }, 0);
      expect(await feed.sent()).toBeUndefined();

      // B's /56 is removed and the filter gains a line: both show after a refresh
      await git('rm', '-q', 'data/route6/fd00:abcd:e:100::_56');
      await writeFile(
        path.join(work, 'data', 'filter.txt'),
        '0002 deny 172.20.16.0/22 22 32 # test\n1100 permit 172.20.0.0/14 21 29\n',
      );
      await git('commit', '-q', '-am', 'remove the /56, deny a /22');
      await git('push', '-q', path.join(dir, 'served', 'registry.git'), 'master');
      expect(await errorsFor(A, 'fd00:abcd:e:100::1', mirror)).toHaveLength(1); // not refreshed yet
      expect(await mirror.refresh()).toBe(true);
      expect(await errorsFor(A, 'fd00:abcd:e:100::1', mirror)).toEqual([]);
      expect((await feed.sent())?.ipv4.map((r) => r.nr)).toEqual([2, 1100]);
      expect(await errorsFor(A, '172.20.16.1', mirror)).toEqual([
        "no route object in the registry gives 172.20.16.1 to AS4242420101 (route 172.20.16.0/22 (AS4242420101, denied by line 0002 of the registry's filter.txt, does not count))",
      ]);
    } finally {
      await mirror.close();
    }
  });
});
