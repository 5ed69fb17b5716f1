/**
 * Issue 29, item 1: the CLI as kubectl and gh behave. Contexts in a temp XDG_CONFIG_HOME, every output
 * format, session show by prefix, routers, shell completion, "did you mean", and each network failure
 * as one line with its exit status (docs/cli.md).
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { distance } from '../../cli/client.ts';
import { ADMIN_ASN, USER_ASN, sessionFields, startHarness, type Harness } from '../api/helpers.ts';
import { freePort } from '../support/ports.ts';

const exec = promisify(execFile);

let h: Harness;
let url: string;
let host: string;
let root: string;

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** `peerops …` with HOME and XDG_CONFIG_HOME of its own and no PEEROPS_* from the test's environment. */
async function peerops(args: string[], env: Record<string, string> = {}, home = 'home'): Promise<Result> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('PEEROPS_')));
  try {
    const { stdout, stderr } = await exec(process.execPath, ['bin/peerops.ts', ...args], {
      env: { ...base, HOME: join(root, home), XDG_CONFIG_HOME: join(root, home, '.config'), ...env },
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const adminCtx = () => `AS${ADMIN_ASN}@${host}`;
const userCtx = () => `AS${USER_ASN}@${host}`;

beforeAll(async () => {
  h = await startHarness();
  url = await h.app.listen({ host: '127.0.0.1', port: 0 });
  host = new URL(url).host;
  root = await mkdtemp(join(tmpdir(), 'peerops-cli-ctx-'));
  await h.addRouter('ctx1');
});
afterAll(async () => {
  await h?.close();
  await rm(root, { recursive: true, force: true });
});

describe('contexts', () => {
  const save = (asn: number, ...extra: string[]) =>
    peerops(['admin', 'token', '--data', h.dir, '--asn', String(asn), '--save', '--url', url, ...extra]);

  it('two logins are two contexts; the last is current; the file is 0600 in a 0700 dir', async () => {
    const admin = await save(ADMIN_ASN, '--admin');
    expect(admin.code, admin.stderr).toBe(0);
    const user = await save(USER_ASN);
    expect(user.code, user.stderr).toBe(0);
    expect(user.stderr).toContain(`as context ${userCtx()} (now current)`);
    const dir = join(root, 'home', '.config', 'peerops');
    expect((await stat(join(dir, 'config.yaml'))).mode & 0o777).toBe(0o600);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);

    const list = await peerops(['context', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`^\\s+${adminCtx()}\\s+${url}\\s+admin$`, 'm'));
    expect(list.stdout).toMatch(new RegExp(`^\\*\\s+${userCtx()}\\s+${url}\\s+user$`, 'm'));
    // the tokens are not shown, in any format
    const json = await peerops(['context', 'list', '-o', 'json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ currentContext: userCtx() });
    expect(json.stdout).not.toMatch(/token|eyJ/);
    expect((await peerops(['context', 'list', '-o', 'wide'])).stdout).toMatch(/EXPIRES/);
  });

  it('the current context gives URL and token; use switches; env and flags override', async () => {
    // the user context: admin routes refused (exit 1), own sessions fine, no PEEROPS_URL needed
    const asUser = await peerops(['admin', 'router', 'list']);
    expect(asUser.code).toBe(1);
    expect(asUser.stderr).toMatch(/^FORBIDDEN: /);
    expect((await peerops(['session', 'list'])).code).toBe(0);

    const use = await peerops(['context', 'use', adminCtx()]);
    expect(use.code, use.stderr).toBe(0);
    expect(use.stdout).toContain(`current context: ${adminCtx()}`);
    expect((await peerops(['admin', 'router', 'list'])).code).toBe(0);

    // PEEROPS_CONTEXT and --context pick another one for one command
    expect((await peerops(['admin', 'router', 'list'], { PEEROPS_CONTEXT: userCtx() })).code).toBe(1);
    expect((await peerops(['admin', 'router', 'list', '--context', userCtx()])).code).toBe(1);
    // PEEROPS_TOKEN beats the context's token, PEEROPS_URL and --url its URL
    const token = h.tokens.issueToken(USER_ASN, 'user').token;
    expect((await peerops(['admin', 'router', 'list'], { PEEROPS_TOKEN: token })).code).toBe(1);
    const closed = `http://127.0.0.1:${await freePort()}`;
    expect((await peerops(['routers'], { PEEROPS_URL: closed })).code).toBe(3);
    expect((await peerops(['routers', '--url', closed])).code).toBe(3);
    // the context's token is not sent to another controller (another origin: localhost, not 127.0.0.1)
    const other = url.replace('127.0.0.1', 'localhost');
    const elsewhere = await peerops(['session', 'list', '--url', other]);
    expect([elsewhere.code, elsewhere.stderr]).toEqual([
      1,
      `INVALID_TOKEN: not logged in to ${other} (context ${adminCtx()} is for ${url}): run \`peerops login --url ${other}\`\n`,
    ]);
    // a URL that reaches nothing says so (exit 3), though no token would be sent to it either
    const away = await peerops(['session', 'list', '--url', closed]);
    expect([away.code, away.stderr]).toEqual([
      3,
      `UNREACHABLE: cannot reach the controller at ${closed}: connection refused\n`,
    ]);

    const unknown = await peerops(['session', 'list', '--context', 'nope']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^USAGE: no context 'nope' \(saved: /);
    const typo = await peerops(['context', 'use', adminCtx().slice(0, -1)]);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain(`did you mean '${adminCtx()}'?`);
  });

  it('remove forgets a context; removing the current one leaves none current', async () => {
    const rm1 = await peerops(['context', 'remove', userCtx()]);
    expect(rm1.code, rm1.stderr).toBe(0);
    const list = await peerops(['context', 'list', '-o', 'json']);
    expect(JSON.parse(list.stdout).contexts.map((c: { name: string }) => c.name)).toEqual([adminCtx()]);
    const rm2 = await peerops(['context', 'remove', adminCtx()]);
    expect(rm2.stdout).toMatch(/no context is current now/);
    // no context: no token (PEEROPS_URL: the default URL may reach nothing here, which is exit 3)
    const none = await peerops(['session', 'list'], { PEEROPS_URL: url });
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^INVALID_TOKEN: not logged in/);
  });

  it('--context NAME on admin token --save names the context', async () => {
    const res = await save(ADMIN_ASN, '--admin', '--context', 'lab');
    expect(res.code, res.stderr).toBe(0);
    expect((await peerops(['context', 'list'])).stdout).toMatch(/^\*\s+lab\s/m);
    expect((await peerops(['admin', 'router', 'list'])).code).toBe(0);
  });

  it('the token file of older versions is moved into a context once, and says so once', async () => {
    const dir = join(root, 'old', '.config', 'peerops');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'token'), `${h.admin}\n`, { mode: 0o600 });
    const first = await peerops(['admin', 'router', 'list'], { PEEROPS_URL: url }, 'old');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toMatch(new RegExp(`moved the token of .*token into context ${adminCtx()}`));
    await expect(stat(join(dir, 'token'))).rejects.toThrow(/ENOENT/);
    expect((await stat(join(dir, 'config.yaml'))).mode & 0o777).toBe(0o600);
    const again = await peerops(['admin', 'router', 'list'], {}, 'old');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toBe('');
  });
});

describe('output', () => {
  // an admin sees every session: one ASN has one session per router, and the prefixes need several
  const user = () => ({ PEEROPS_URL: url, PEEROPS_TOKEN: h.admin });
  const uuids: string[] = [];

  beforeAll(async () => {
    // sessions until two UUIDs share their first digit (16 digits: at most 17 sessions)
    for (let i = 0; i < 17; i++) {
      const token = h.tokens.issueToken(4242428000 + i, 'user').token;
      const res = await h.post('/session', token, sessionFields('ctx1'));
      const uuid = (res.json() as { uuid: string }).uuid;
      expect(uuid, res.body).toBeDefined();
      uuids.push(uuid);
      if (new Set(uuids.map((u) => u[0])).size < uuids.length) break;
    }
  });

  it('session list: -o table, wide, json, yaml; --json is -o json', async () => {
    const tableOut = await peerops(['session', 'list', '-o', 'table'], user());
    expect(tableOut.code, tableOut.stderr).toBe(0);
    expect(tableOut.stdout).toMatch(
      /^UUID\s+ROUTER\s+ASN\s+STATUS\s+BGP\s+IPV6\s+ENDPOINT\s+MTU\s+LAST ERROR$/m,
    );
    expect((await peerops(['session', 'list'], user())).stdout).toBe(tableOut.stdout);
    const wide = await peerops(['session', 'list', '-o', 'wide'], user());
    expect(wide.stdout).toMatch(
      /^UUID\s+ROUTER\s+ASN\s+STATUS\s+BGP\s+LAST HANDSHAKE\s+IPV6\s+LINK-LOCAL\s+.*SERVER ENDPOINT/m,
    );
    const json = JSON.parse((await peerops(['session', 'list', '-o', 'json'], user())).stdout);
    expect(json.sessions.map((s: { uuid: string }) => s.uuid).sort()).toEqual([...uuids].sort());
    expect(JSON.parse((await peerops(['session', 'list', '--json'], user())).stdout)).toEqual(json);
    const yaml = await peerops(['session', 'list', '--output', 'yaml'], user());
    expect(load(yaml.stdout)).toEqual(json);
    const bad = await peerops(['session', 'list', '-o', 'yml'], user());
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("USAGE: -o 'yml': one of table, wide, json, yaml; did you mean 'yaml'?\n");
    expect((await peerops(['session', 'list', '--json', '-o', 'yaml'], user())).code).toBe(2);
  });

  it('admin listings and policy get take -o too', async () => {
    const env = { PEEROPS_URL: url, PEEROPS_TOKEN: h.admin };
    for (const args of [
      ['admin', 'session', 'list'],
      ['admin', 'router', 'list'],
      ['admin', 'policy', 'get'],
    ]) {
      const json = await peerops([...args, '-o', 'json'], env);
      expect(json.code, json.stderr).toBe(0);
      expect(load((await peerops([...args, '-o', 'yaml'], env)).stdout)).toEqual(JSON.parse(json.stdout));
      expect((await peerops([...args, '-o', 'wide'], env)).code).toBe(0);
    }
    const wide = await peerops(['admin', 'router', 'list', '-o', 'wide'], env);
    expect(wide.stdout).toMatch(/^NAME\s+UUID\s+NODE\s+REGION\s+LOCATION\s+PROVIDER\s+.*LOOPBACK IPV6/m);
    expect(wide.stdout).toMatch(/^ctx1\s+[0-9a-f-]{36}\s/m);
  });

  it('session show takes a UUID or a unique prefix; an ambiguous prefix lists the matches', async () => {
    const [first] = uuids as [string];
    const whole = await peerops(['session', 'show', first], user());
    expect(whole.code, whole.stderr).toBe(0);
    expect(whole.stdout).toMatch(new RegExp(`^uuid\\s+${first}$`, 'm'));
    // the shortest prefix no other session starts with
    let n = 1;
    while (uuids.some((u) => u !== first && u.startsWith(first.slice(0, n)))) n++;
    const short = await peerops(['session', 'show', first.slice(0, n), '-o', 'json'], user());
    expect(short.code, short.stderr).toBe(0);
    expect(JSON.parse(short.stdout)).toMatchObject({ uuid: first, router: 'ctx1' });

    const digit = uuids.find((u, i) => uuids.findIndex((x) => x[0] === u[0]) !== i)?.[0] as string;
    const matching = uuids.filter((u) => u.startsWith(digit));
    const many = await peerops(['session', 'show', digit], user());
    expect(many.code).toBe(2);
    expect(many.stderr.trim()).toBe(
      `USAGE: '${digit}' matches ${matching.length} sessions: ${matching.join(', ')}`,
    );
    const hex = '0123456789abcdef';
    const unused = [...hex].find((d) => !uuids.some((u) => u.startsWith(d))) ?? `${first.slice(0, 8)}-ffff`;
    const none = await peerops(['session', 'show', unused], user());
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^SESSION_NOT_FOUND: no session whose UUID starts with/);
    expect((await peerops(['session', 'show', 'zz'], user())).code).toBe(2);
    // the other session commands take a prefix too
    const del = await peerops(['session', 'delete', first.slice(0, n)], user());
    expect(del.code, del.stderr).toBe(0);
    expect(del.stdout).toContain(first);
  });

  it('routers lists the public routers without a login, in every format', async () => {
    const env = { PEEROPS_URL: url };
    const tableOut = await peerops(['routers'], env);
    expect(tableOut.code, tableOut.stderr).toBe(0);
    expect(tableOut.stdout).toMatch(/^NAME\s+DISPLAY NAME\s+REGION\s+LOCATION\s+ENDPOINT HOST\s+ACCEPTING$/m);
    expect(tableOut.stdout).toMatch(/^ctx1\s/m);
    expect((await peerops(['routers', '-o', 'wide'], env)).stdout).toMatch(/PUBLIC KEY\s+LINK-LOCAL/);
    const json = JSON.parse((await peerops(['routers', '-o', 'json'], env)).stdout);
    expect(json.routers.find((r: { name: string }) => r.name === 'ctx1')).toMatchObject({ accepting: true });
    expect(load((await peerops(['routers', '-o', 'yaml'], env)).stdout)).toEqual(json);
  });
});

describe('completion', () => {
  it('the bash script registers itself and completes commands, actions and flags', async () => {
    const script = (words: string[]) =>
      `eval "$("${process.execPath}" bin/peerops.ts completion bash)"
complete -p peerops
COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _peerops
echo "\${COMPREPLY[*]}"`;
    const run = async (words: string[]) => (await exec('bash', ['-c', script(words)])).stdout.split('\n');
    const [registered, commands] = await run(['peerops', 'se']);
    expect(registered).toBe('complete -F _peerops peerops');
    expect(commands).toBe('session serve');
    expect((await run(['peerops', 'session', 'sh']))[1]).toBe('show');
    expect((await run(['peerops', 'admin', 'router', 'rot']))[1]).toBe('rotate-token');
    expect((await run(['peerops', 'session', 'list', '--li']))[1]).toBe('--link-local');
    expect((await run(['peerops', 'routers', '-o', 'y']))[1]).toBe('yaml');
  });
  it('zsh and fish scripts; an unknown shell is a usage error', async () => {
    expect((await peerops(['completion', 'zsh'])).stdout).toMatch(/bashcompinit[\s\S]*complete -F _peerops/);
    expect((await peerops(['completion', 'fish'])).stdout).toMatch(/^complete -c peerops /m);
    const bad = await peerops(['completion', 'bsh']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("USAGE: unknown shell 'bsh'; did you mean 'bash'?\n");
  });
});

describe('errors', () => {
  it('Levenshtein distance', () => {
    expect(distance('kitten', 'sitting')).toBe(3);
    expect(distance('--linklocal', '--link-local')).toBe(1);
    expect(distance('', 'abc')).toBe(3);
  });

  it('a mistyped command, action or flag: one line with the nearest known one, exit 2', async () => {
    const cases: [string[], string][] = [
      [['sesion', 'list'], "USAGE: unknown command 'sesion'; did you mean 'session'?"],
      [['session', 'lsit'], "USAGE: unknown session action 'lsit'; did you mean 'list'?"],
      [['admin', 'routr', 'list'], "USAGE: unknown admin area 'routr'; did you mean 'router'?"],
      [
        ['session', 'create', '--linklocal', 'fe80::1'],
        "USAGE: unknown option '--linklocal'; did you mean '--link-local'?",
      ],
      [['context', 'lst'], "USAGE: unknown context action 'lst'; did you mean 'list'?"],
      [['session', 'list', '--frobnicate'], "USAGE: unknown option '--frobnicate'"],
      [['session', 'list', '--url'], 'USAGE: --url needs a value'],
    ];
    const results = await Promise.all(cases.map(([args]) => peerops(args, { PEEROPS_URL: url })));
    expect(results.map((r) => [r.code, r.stderr])).toEqual(cases.map(([, line]) => [2, `${line}\n`]));
  });

  it('https:// to a plain-HTTP controller, refused, unknown host, timeout: one line each, exit 3', async () => {
    const token = h.tokens.issueToken(USER_ASN, 'user').token;
    const tls = url.replace(/^http:/, 'https:');
    const closed = `http://127.0.0.1:${await freePort()}`;
    // accepts connections and never answers
    const silent: Server = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const mute = `http://127.0.0.1:${(silent.address() as { port: number }).port}`;
    try {
      const cases: [string, Record<string, string>, string][] = [
        [tls, {}, `UNREACHABLE: the controller at ${tls} does not speak HTTPS; use ${url}`],
        [closed, {}, `UNREACHABLE: cannot reach the controller at ${closed}: connection refused`],
        [
          'http://no-such-host.invalid',
          {},
          'UNREACHABLE: cannot reach the controller at http://no-such-host.invalid: no such host no-such-host.invalid',
        ],
        [
          mute,
          { PEEROPS_TIMEOUT: '1' },
          `UNREACHABLE: cannot reach the controller at ${mute}: no answer within 1 s`,
        ],
      ];
      const results = await Promise.all(
        cases.map(([u, env]) => peerops(['session', 'list', '--url', u], { PEEROPS_TOKEN: token, ...env })),
      );
      expect(results.map((r) => [r.code, r.stderr])).toEqual(cases.map(([, , line]) => [3, `${line}\n`]));
      const routers = await peerops(['routers', '--url', tls]);
      expect([routers.code, routers.stderr]).toEqual([3, `${cases[0]?.[2]}\n`]);
    } finally {
      silent.close();
    }
  });

  it('--ttl outside the server limits is refused before anything is minted; exit 2', async () => {
    for (const ttl of ['1', '59', '31622401']) {
      const res = await peerops([
        'admin',
        'token',
        '--data',
        h.dir,
        '--asn',
        String(ADMIN_ASN),
        '--ttl',
        ttl,
      ]);
      expect([res.code, res.stdout, res.stderr]).toEqual([
        2,
        '',
        'USAGE: --ttl must be 60..31622400 seconds (1 minute to 366 days)\n',
      ]);
    }
    expect((await peerops(['admin', 'token', '--data', h.dir, '--asn', '1', '--ttl', '60'])).code).toBe(0);
  });

  it('a garbage key: one error for the field; the controller refusing is exit 1', async () => {
    const env = { PEEROPS_URL: url, PEEROPS_TOKEN: h.tokens.issueToken(USER_ASN, 'user').token };
    const res = await peerops(
      [
        'session',
        'create',
        '--router',
        'ctx1',
        '--ipv6',
        'fd42:1234::99',
        '--link-local',
        'fe80::99',
        '--public-key',
        'garbage!',
      ],
      env,
    );
    expect(res.code).toBe(1);
    const lines = res.stderr.trim().split('\n');
    expect(lines.filter((l) => l.includes('/publicKey'))).toHaveLength(1);
    expect(lines[0]).toMatch(/^INVALID_REQUEST: .*\/publicKey \(--public-key\): /);
  });
});
