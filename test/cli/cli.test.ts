/** The session and admin CLIs as child processes against a listening controller on the git store. */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { problemText, table } from '../../cli/client.ts';
import { loadConfig } from '../../cli/config.ts';
import {
  ADMIN_ASN,
  USER_ASN,
  routerFields,
  sessionFields,
  startHarness,
  wgKey,
  type Harness,
} from '../api/helpers.ts';
import { freePort } from '../support/ports.ts';

const exec = promisify(execFile);

let h: Harness;
let url: string;
let home: string;

async function peerops(
  args: string[],
  token?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['bin/peerops.ts', ...args], {
      env: {
        ...process.env,
        PEEROPS_URL: url,
        PEEROPS_CONFIG_DIR: join(home, 'config'),
        ...(token ? { PEEROPS_TOKEN: token } : {}),
      },
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

beforeAll(async () => {
  // no DN42 registry here: auto-approval needs the operator's opt-in (docs/operator-guide.md, 4)
  h = await startHarness({ autoApproveWithoutRegistry: true });
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  home = await mkdtemp(join(tmpdir(), 'peerops-cli-'));
});
afterAll(async () => {
  await h?.close();
  await rm(home, { recursive: true, force: true });
});

describe('cli/client', () => {
  it('problemText tells each field error once: the one the detail restates there, with its flag', () => {
    const ipv6 = { pointer: '/ipv6', message: 'must be an IPv6 address' };
    const mtu = { pointer: '/mtu', message: 'must be >= 1280' };
    expect(problemText('create /ipv6: must be an IPv6 address', [ipv6, mtu])).toBe(
      'create /ipv6 (--ipv6): must be an IPv6 address\n  /mtu (--mtu): must be >= 1280',
    );
    expect(problemText('/ipv6: must be an IPv6 address', [ipv6])).toBe(
      '/ipv6 (--ipv6): must be an IPv6 address',
    );
    const node = { pointer: '/nodeId', message: 'nodeId 3 is used by router r2' };
    expect(problemText('router r1: nodeId 3 is used by router r2', [node])).toBe(
      'router r1 /nodeId (--node-id): nodeId 3 is used by router r2',
    );
    // a detail that does not restate the first field error stays; every field error is listed
    const port = { pointer: '/listenPort', message: 'is used by session as1.r1' };
    expect(problemText('port 20001 is used by session as1.r1', [port])).toBe(
      'port 20001 is used by session as1.r1\n  /listenPort: is used by session as1.r1',
    );
    expect(problemText('no router r9')).toBe('no router r9');
    // a garbage key breaks two rules of one field: one line for the field
    const key = [
      { pointer: '/publicKey', message: 'must match pattern' },
      { pointer: '/publicKey', message: 'must be 44 characters' },
    ];
    expect(problemText('create /publicKey: must match pattern', key)).toBe(
      'create /publicKey (--public-key): must match pattern',
    );
  });

  it('tables and problems show a control or bidi character from the server escaped', () => {
    // an older store may hold text from before the field rule (a multi-line BIRD message, U+202E)
    expect(table(['LAST ERROR'], [['bird: a\nb \u202eevil \u001b[2J']])).toBe(
      'LAST ERROR\nbird: a\\u{a}b \\u{202e}evil \\u{1b}[2J',
    );
    expect(problemText('no router r\u202e9', [{ pointer: '/name', message: 'x\ny' }])).toBe(
      'no router r\\u{202e}9\n  /name: x\\u{a}y',
    );
  });
});

describe('usage errors', () => {
  it('every command says them as USAGE: … on stderr with exit status 2', async () => {
    const cases = [
      ['frobnicate'],
      ['login'],
      ['login', '--frobnicate'],
      ['login', '--asn', 'nope'],
      ['serve', '--frobnicate'],
      ['serve', '--listen', 'nope'],
      ['agent', '--frobnicate'],
      ['agent', 'extra'],
      ['validate', '--frobnicate'],
      ['validate', 'a', 'b'],
      ['validate', join(home, 'no-such-dir')],
      ['session', 'frobnicate'],
      ['admin', 'session', 'list', '--frobnicate'],
    ];
    const results = await Promise.all(cases.map((args) => peerops(args)));
    // every case that does not, with what it said instead
    const wrong = results
      .map((r, i) => ({ args: (cases[i] ?? []).join(' '), code: r.code, said: r.stderr.split('\n')[0] }))
      .filter((r) => r.code !== 2 || !/^USAGE: \S/.test(r.said ?? ''));
    expect(wrong).toEqual([]);
  });
});

describe('peerops admin', () => {
  it('token mints a JWT from the data dir key that the controller accepts, and --save stores it', async () => {
    const res = await peerops([
      'admin',
      'token',
      '--data',
      h.dir,
      '--asn',
      String(ADMIN_ASN),
      '--admin',
      '--ttl',
      '600',
      '--save',
    ]);
    expect(res.code, res.stderr).toBe(0);
    const token = res.stdout.trim();
    expect(h.tokens.verify(token)).toMatchObject({ asn: ADMIN_ASN, role: 'admin' });
    const name = `AS${ADMIN_ASN}@${new URL(url).host}`;
    expect(await loadConfig({ PEEROPS_CONFIG_DIR: join(home, 'config') })).toEqual({
      currentContext: name,
      contexts: [{ name, url, token }],
    });
    expect(res.stderr).toContain(`token saved to ${join(home, 'config', 'config.yaml')} as context ${name}`);
  });
  it('router add (token shown once), list, update, rotate-token', async () => {
    const f = routerFields('cli1');
    const add = await peerops([
      'admin',
      'router',
      'add',
      'cli1',
      '--display-name',
      f.displayName,
      '--node-id',
      String(f.nodeId),
      '--region',
      f.region,
      '--endpoint-host',
      f.endpointHost,
      '--public-key',
      f.publicKey,
      '--link-local',
      f.linkLocal,
      '--loopback-ipv4',
      f.loopback.ipv4,
      '--json',
    ]);
    expect(add.code, add.stderr).toBe(0);
    expect(JSON.parse(add.stdout).agentToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const list = await peerops(['admin', 'router', 'list']);
    expect(list.stdout).toMatch(/^NAME\s+NODE\s+REGION/);
    expect(list.stdout).toContain('cli1');
    const upd = await peerops([
      'admin',
      'router',
      'update',
      'cli1',
      '--auto-approve',
      '--max-sessions',
      '10',
    ]);
    expect(upd.code, upd.stderr).toBe(0);
    expect(h.store.getRouter('cli1')?.spec).toMatchObject({
      autoApprove: true,
      maxSessions: 10,
    });
    const rot = await peerops(['admin', 'router', 'rotate-token', 'cli1']);
    expect(rot.stdout).toMatch(/[A-Za-z0-9_-]{43}/);
  });
  it('session list --router: an unknown router is ROUTER_NOT_FOUND, not an empty table', async () => {
    const none = await peerops(['admin', 'session', 'list', '--router', 'nowhere']);
    expect(none.code).toBe(1);
    expect(none.stderr.trim()).toBe('ROUTER_NOT_FOUND: no router nowhere');
    expect(none.stdout).toBe('');
    const json = await peerops(['admin', 'session', 'list', '--router', 'nowhere', '--json']);
    expect(json.code).toBe(1);
    expect(json.stderr.trim()).toBe('ROUTER_NOT_FOUND: no router nowhere');
    // a router without sessions is an empty list, not an error
    const empty = await peerops(['admin', 'session', 'list', '--router', 'cli1']);
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stdout.trim()).toMatch(
      /^UUID\s+ROUTER\s+ASN\s+STATUS\s+IPV6\s+IPV4\s+ENDPOINT\s+CREATED\s+POLICY$/,
    );
    const emptyJson = await peerops(['admin', 'session', 'list', '--router', 'cli1', '--json']);
    expect(JSON.parse(emptyJson.stdout)).toEqual({ sessions: [] });
  });
  it('policy set edits the stored policy with flags; get shows it', async () => {
    const set = await peerops([
      'admin',
      'policy',
      'set',
      '--dn42-asn',
      String(ADMIN_ASN),
      '--rpki',
      'rpki.example.net:8282',
      '--block',
      '64512',
    ]);
    expect(set.code, set.stderr).toBe(0);
    // nothing to change: a usage error, not an empty commit
    const empty = await peerops(['admin', 'policy', 'set']);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/policy set needs --spec FILE or a field/);
    const get = await peerops(['admin', 'policy', 'get', '--json']);
    expect(JSON.parse(get.stdout).spec).toMatchObject({
      dn42Asn: ADMIN_ASN,
      blockedAsns: [64512],
      rpkiServers: [{ host: 'rpki.example.net', port: 8282 }],
    });
    const table = await peerops(['admin', 'policy', 'get']);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^policy\s+default$/m);
    expect(table.stdout).toMatch(new RegExp(`^dn42Asn\\s+${ADMIN_ASN}$`, 'm'));
    expect(table.stdout).toMatch(/^rpkiServers\s+rpki\.example\.net:8282$/m);
    expect(table.stdout).toMatch(/^blockedAsns\s+64512$/m);
  });
  it('session reject, disable and enable, the owner reads each reason (docs/cli.md); router remove', async () => {
    const agentToken = await h.addRouter('cli2');
    const create = async (asn: number) =>
      (await h.post('/session', h.tokens.issueToken(asn, 'user').token, sessionFields('cli2'))).json()
        .uuid as string;
    const rejected = await create(4242427001);
    const reject = await peerops(['admin', 'session', 'reject', rejected, '--reason', 'not in the registry']);
    expect(reject.code, reject.stderr).toBe(0);
    expect(reject.stdout).toContain(`session ${rejected}: REJECTED`);
    // the owner reads the reason in list and show (docs/api.md, Decisions)
    const rejectedOwner = h.tokens.issueToken(4242427001, 'user').token;
    const shown = await peerops(['session', 'show', rejected], rejectedOwner);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^status\s+7 REJECTED$/m);
    expect(shown.stdout).toMatch(
      new RegExp(`^decision\\s+rejected by admin AS${ADMIN_ASN} at \\S+Z: not in the registry$`, 'm'),
    );
    expect(shown.stdout).toMatch(/^shown until\s+\S+Z, then removed$/m);
    const listed = await peerops(['session', 'list'], rejectedOwner);
    expect(listed.stdout).toMatch(/REJECTED\s.*rejected: not in the registry/);

    const uuid = await create(4242427002);
    expect((await peerops(['admin', 'session', 'approve', uuid])).code).toBe(0);
    const port = h.store.getSession(uuid)?.spec.listenPort;
    await h.post('/agent/cli2/modify', agentToken, { uuid, status: 1, interface: `wg_${port}` });
    const disable = await peerops(['admin', 'session', 'disable', uuid, '--reason', 'maintenance']);
    expect(disable.code, disable.stderr).toBe(0);
    expect(disable.stdout).toContain('DISABLED');
    expect(h.store.getSession(uuid)?.status.code).toBe(0);
    const disabledShown = await peerops(
      ['session', 'show', uuid],
      h.tokens.issueToken(4242427002, 'user').token,
    );
    expect(disabledShown.stdout).toMatch(/^decision\s+turned off by admin AS\d+ at \S+Z: maintenance$/m);
    const enable = await peerops(['admin', 'session', 'enable', uuid, '--json']);
    expect(enable.code, enable.stderr).toBe(0);
    expect(JSON.parse(enable.stdout)).toMatchObject({ uuid, status: 4, statusName: 'QUEUED_FOR_SETUP' });

    await h.addRouter('cli3');
    const remove = await peerops(['admin', 'router', 'remove', 'cli3']);
    expect(remove.code, remove.stderr).toBe(0);
    expect(h.store.getRouter('cli3')).toBeUndefined();
    const again = await peerops(['admin', 'router', 'remove', 'cli3']);
    expect(again.code).toBe(1);
    expect(again.stderr.trim()).toBe('ROUTER_NOT_FOUND: no router cli3');
  });
});

describe('peerops session', () => {
  const user = () => h.tokens.issueToken(USER_ASN, 'user').token;
  let uuid: string;
  it('create prints what to configure; list shows a table', async () => {
    await h.addRouter('fra1');
    const res = await peerops(
      [
        'session',
        'create',
        '--router',
        'fra1',
        '--ipv6',
        'fd42::1',
        '--link-local',
        'fe80::42',
        '--public-key',
        wgKey(),
        '--endpoint',
        'peer.example.org:51820',
      ],
      user(),
    );
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/created session [0-9a-f-]{36} \(PENDING_REVIEW\)/);
    expect(res.stdout).toMatch(/endpoint\s+fra1\.example\.net:2\d{4}/);
    uuid = /created session ([0-9a-f-]{36})/.exec(res.stdout)?.[1] as string;
    const list = await peerops(['session', 'list'], user());
    expect(list.stdout).toMatch(/^UUID\s+ROUTER\s+ASN\s+STATUS/);
    expect(list.stdout).toContain(uuid);
    const json = await peerops(['session', 'list', '--json'], user());
    expect(JSON.parse(json.stdout).sessions[0]).toMatchObject({ uuid, statusName: 'PENDING_REVIEW' });
  });
  it('admin approve, then modify, restart refused in status 4, delete', async () => {
    expect((await peerops(['admin', 'session', 'approve', uuid, '--reason', 'ok'])).stdout).toContain(
      'QUEUED_FOR_SETUP',
    );
    const mod = await peerops(['session', 'modify', uuid, '--mtu', '1400', '--no-endpoint'], user());
    expect(mod.code, mod.stderr).toBe(0);
    expect(mod.stdout).toMatch(/mtu\s+1400/);
    const restart = await peerops(['session', 'restart', uuid], user());
    expect(restart.code).toBe(1);
    expect(restart.stderr.trim()).toMatch(/^INVALID_STATE: restart is not allowed/);
    const del = await peerops(['session', 'delete', uuid, '--json'], user());
    expect(JSON.parse(del.stdout)).toMatchObject({ status: 5 });
    const adminList = await peerops(['admin', 'session', 'list', '--status', '5']);
    expect(adminList.stdout).toContain(uuid);
    const onFra1 = await peerops(['admin', 'session', 'list', '--router', 'fra1']);
    expect(onFra1.code, onFra1.stderr).toBe(0);
    expect(onFra1.stdout).toContain(uuid);
    // by the name the tables show, too
    const byName = await peerops(['admin', 'session', 'list', '--status', 'queued_for_delete']);
    expect(byName.stdout).toBe(adminList.stdout);
  });
  it('admin session list shows IPv4 and what a tightened policy no longer allows', async () => {
    await h.addRouter('cli7');
    const token = h.tokens.issueToken(4242427007, 'user').token;
    const res = await h.post('/session', token, sessionFields('cli7', { ipv4: '172.22.7.7' }));
    const uuid = (res.json() as { uuid: string }).uuid;
    const fine = await peerops(['admin', 'session', 'list', '--router', 'cli7']);
    expect(fine.stdout).toMatch(new RegExp(`${uuid}.*172\\.22\\.7\\.7.*ok$`, 'm'));
    await h.post('/admin/policy', h.admin, {
      action: 'set',
      name: 'cli7',
      spec: { peerAddressRanges: { ipv4: ['10.0.0.0/8'] } },
    });
    const flagged = await peerops(['admin', 'session', 'list', '--router', 'cli7']);
    expect(flagged.code, flagged.stderr).toBe(0);
    expect(flagged.stdout).toMatch(new RegExp(`${uuid}.*violated$`, 'm'));
    expect(flagged.stdout).toContain(
      `policy violations:\n  ${uuid} /ipv4: must be inside 10.0.0.0/8 (the policy's peerAddressRanges.ipv4)`,
    );
    const approve = await peerops(['admin', 'session', 'approve', uuid]);
    expect(approve.code).toBe(1);
    expect(approve.stderr).toMatch(
      /^INVALID_STATE: approve: session as4242427007-cli7 breaks the current policy/,
    );
  });
  it('modify rotates the key, changes link-local, IPv4 and the BGP options, and says what it refuses', async () => {
    const agentToken = await h.addRouter('cli8');
    const token = h.tokens.issueToken(4242427008, 'user').token;
    const uuid = (await h.post('/session', token, sessionFields('cli8'))).json().uuid as string;
    await h.post('/admin/session', h.admin, { action: 'approve', uuid });
    const port = h.store.getSession(uuid)?.spec.listenPort;
    await h.post('/agent/cli8/modify', agentToken, { uuid, status: 1, interface: `wg_${port}` });
    const key = wgKey();
    const rotated = await peerops(
      ['session', 'modify', uuid, '--public-key', key, '--link-local', 'fe80::88'],
      token,
    );
    expect(rotated.code, rotated.stderr).toBe(0);
    // no review for a key by default: queued for setup, the router applies it
    expect(rotated.stdout).toMatch(/^status\s+4 QUEUED_FOR_SETUP$/m);
    expect(rotated.stdout).toMatch(new RegExp(`^public key\\s+${key.replaceAll('+', '\\+')}$`, 'm'));
    expect(rotated.stdout).toMatch(/^link-local\s+fe80::88$/m);
    // a new IPv4 address is reviewed again on a router without autoApprove
    const ipv4 = await peerops(
      ['session', 'modify', uuid, '--ipv4', '172.22.8.8', '--no-mpbgp', '--no-extended-next-hop', '--json'],
      token,
    );
    expect(ipv4.code, ipv4.stderr).toBe(0);
    expect(JSON.parse(ipv4.stdout)).toMatchObject({
      status: 3,
      ipv4: '172.22.8.8',
      mpbgp: false,
      extendedNextHop: false,
    });
    // the controller's refusal names the field and the flag
    const refused = await peerops(['session', 'modify', uuid, '--no-ipv4'], token);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^INVALID_REQUEST: \/mpbgp \(--\[no-\]mpbgp\): /);
    const back = await peerops(
      ['session', 'modify', uuid, '--no-ipv4', '--mpbgp', '--extended-next-hop'],
      token,
    );
    expect(back.code, back.stderr).toBe(0);
    expect(back.stdout).toMatch(/^ipv4\s+-$/m);
    for (const [args, words] of [
      [['--mpbgp', '--no-mpbgp'], '--mpbgp and --no-mpbgp exclude each other'],
      [['--ipv4', '172.22.8.9', '--no-ipv4'], '--ipv4 and --no-ipv4 exclude each other'],
      [['--router', 'fra1'], 'a session stays on its router'],
      [[], 'modify needs something to change'],
    ] as const) {
      const res = await peerops(['session', 'modify', uuid, ...args], token);
      expect(res.code, `${args.join(' ')}: ${res.stderr}`).toBe(2);
      expect(res.stderr).toContain(words);
    }
  });
  it('restart of an ACTIVE session queues it for setup again', async () => {
    const agentToken = await h.addRouter('cli4');
    const token = h.tokens.issueToken(4242427003, 'user').token;
    const uuid = (await h.post('/session', token, sessionFields('cli4'))).json().uuid as string;
    await h.post('/admin/session', h.admin, { action: 'approve', uuid });
    const port = h.store.getSession(uuid)?.spec.listenPort;
    await h.post('/agent/cli4/modify', agentToken, { uuid, status: 1, interface: `wg_${port}` });
    const restart = await peerops(['session', 'restart', uuid], token);
    expect(restart.code, restart.stderr).toBe(0);
    expect(restart.stdout).toMatch(/status\s+4 QUEUED_FOR_SETUP/);
    expect(h.store.getSession(uuid)?.spec.restartGeneration).toBe(1);
  });
  it('errors are shown as code: detail with exit status 1, usage errors with 2', async () => {
    const res = await peerops(
      [
        'session',
        'create',
        '--router',
        'nowhere',
        '--ipv6',
        'fd42::1',
        '--link-local',
        'fe80::42',
        '--public-key',
        wgKey(),
      ],
      user(),
    );
    expect(res.code).toBe(1);
    expect(res.stderr.trim()).toBe('ROUTER_NOT_FOUND: no router nowhere');
    const createOnFra1 = (ipv6: string, linkLocal: string) =>
      peerops(
        [
          'session',
          'create',
          '--router',
          'fra1',
          '--ipv6',
          ipv6,
          '--link-local',
          linkLocal,
          '--public-key',
          wgKey(),
        ],
        user(),
      );
    const bad = await createOnFra1('nope', 'fe80::42');
    // each field error names the flag that sets the field, and is told once
    expect(bad.stderr.trim()).toBe('INVALID_REQUEST: create /ipv6 (--ipv6): must be an IPv6 address');
    const worse = await createOnFra1('nope', 'fd42::1');
    expect(worse.code).toBe(1);
    expect(worse.stderr.trim().split('\n')).toEqual([
      'INVALID_REQUEST: create /ipv6 (--ipv6): must be an IPv6 address',
      '  /linkLocal (--link-local): must be an IPv6 link-local address (fe80::/10)',
    ]);
    expect((await peerops(['session', 'list'], 'garbage')).stderr).toMatch(/^INVALID_TOKEN: /);
    expect((await peerops(['session', 'frobnicate'], user())).code).toBe(2);
    expect((await peerops(['session', 'delete'], user())).code).toBe(2);
    // the router is the one field modify cannot change: refused, not ignored
    const fixed = await peerops(
      ['session', 'modify', '6f1c2a4e-0000-4000-8000-000000000000', '--router', 'ams1'],
      user(),
    );
    expect(fixed.code).toBe(2);
    expect(fixed.stderr).toMatch(/a session stays on its router/);
    expect(
      (await peerops(['session', 'modify', '6f1c2a4e-0000-4000-8000-000000000000'], user())).stderr,
    ).toMatch(/modify needs something to change: --public-key/);
    // an unreachable controller: the reason, not just "fetch failed"
    const closed = `http://127.0.0.1:${await freePort()}`;
    const down = await peerops(['session', 'list', '--url', closed], user());
    expect(down.code).toBe(3);
    expect(down.stderr).toBe(`UNREACHABLE: cannot reach the controller at ${closed}: connection refused\n`);
    // a router without its DN42 addresses: said before anything is sent
    const noLoopback = await peerops([
      'admin',
      'router',
      'add',
      'cli9',
      '--display-name',
      'x',
      '--node-id',
      '9',
    ]);
    expect(noLoopback.code).toBe(2);
    expect(noLoopback.stderr).toMatch(/router add needs --loopback-ipv6 and\/or --loopback-ipv4/);
    const noLogin = await peerops(['session', 'list']);
    expect(noLogin.code, noLogin.stderr).toBe(0); // the admin token saved by `admin token --save`
    expect((await peerops(['context', 'remove', `AS${ADMIN_ASN}@${new URL(url).host}`])).code).toBe(0);
    expect((await peerops(['session', 'list'])).stderr).toMatch(/^INVALID_TOKEN: not logged in/);
  });
});
