/**
 * A new operator's first day with the CLI (docs/cli.md): the network's own prefixes set by flag and a
 * warning while there are none, an unreachable controller told apart from a missing login, suggestions
 * for a mistyped option, `help <command>`, completion of sessions, routers and contexts from the
 * controller, and field errors in words. The real CLI against a real `peerops serve` on loopback.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_OWN_PREFIX_WARNING } from '../../common/rules/policy.ts';
import { wgKey } from '../api/helpers.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { runCli } from './run.ts';

const exec = promisify(execFile);

let home: string;
let controller: ControllerProcess;
let url: string;
let admin: string;

const peerops = (args: string[], opts: { token?: string; url?: string } = {}) =>
  runCli(args, { url: opts.url ?? url, home, token: opts.token });

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'peerops-first-day-'));
  controller = new ControllerProcess(join(home, 'data'), await freePort());
  url = controller.base;
  await controller.start();
  admin = (
    await peerops(['admin', 'token', '--data', join(home, 'data'), '--asn', '4242420000', '--admin'])
  ).stdout.trim();
}, 60_000);
afterAll(async () => {
  await controller?.kill();
  await rm(home, { recursive: true, force: true });
});

describe('the own prefixes', () => {
  it('serve and policy get warn while none is set; --own-prefix sets them; a bad one names the flag', async () => {
    expect(controller.output).toContain(NO_OWN_PREFIX_WARNING);
    const set = await peerops(['admin', 'policy', 'set', '--dn42-asn', '4242420000'], { token: admin });
    expect(set.code).toBe(0);
    expect(set.stderr).toContain(`warning: ${NO_OWN_PREFIX_WARNING}`);
    const get = await peerops(['admin', 'policy', 'get'], { token: admin });
    expect(get.stderr).toContain(`warning: ${NO_OWN_PREFIX_WARNING}`);

    const hostBits = await peerops(['admin', 'policy', 'set', '--own-prefix', '172.20.1.0/8'], {
      token: admin,
    });
    expect(hostBits).toMatchObject({ code: 2 });
    expect(hostBits.stderr).toContain("--own-prefix '172.20.1.0/8' has bits set after /8");
    const garbage = await peerops(['admin', 'policy', 'set', '--own-prefix', 'fd42::1::/48'], {
      token: admin,
    });
    expect(garbage.code).toBe(2);
    expect(garbage.stderr).toContain("--own-prefix 'fd42::1::/48' must be an IPv6 prefix");

    const own = ['--own-prefix', '172.20.53.0/26', '--own-prefix', 'fd42:4242:53::/48'];
    const saved = await peerops(['admin', 'policy', 'set', ...own, '--own-prefix', '172.20.53.0/26'], {
      token: admin,
    });
    expect(saved).toMatchObject({ code: 0, stderr: '' });
    const after = await peerops(['admin', 'policy', 'get', '-o', 'json'], { token: admin });
    expect(after.stderr).toBe('');
    expect(JSON.parse(after.stdout)).toMatchObject({
      spec: {
        dn42Asn: 4242420000,
        ownPrefixes: { ipv4: ['172.20.53.0/26'], ipv6: ['fd42:4242:53::/48'] },
      },
    });
    // the warning at start follows the stored policy
    await controller.kill();
    await controller.start();
    expect(controller.output).not.toContain(NO_OWN_PREFIX_WARNING);
  }, 60_000);
});

describe('an unreachable controller', () => {
  it('is UNREACHABLE (exit 3) naming the URL, logged in or not; a reachable one without login is INVALID_TOKEN', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    for (const token of [undefined, admin]) {
      const r = await peerops(['session', 'list'], { url: closed, token });
      expect(r.code).toBe(3);
      expect(r.stderr).toBe(`UNREACHABLE: cannot reach the controller at ${closed}: connection refused\n`);
    }
    const watch = await peerops(['session', 'list', '--watch'], { url: closed });
    expect(watch.code).toBe(3);
    const noLogin = await peerops(['session', 'list']);
    expect(noLogin.code).toBe(1);
    expect(noLogin.stderr).toMatch(/^INVALID_TOKEN: not logged in/);
  });
});

describe('usage', () => {
  it('suggests the nearest option or command', async () => {
    const version = await runCli(['--verison'], { url, home });
    expect(version).toMatchObject({ code: 2 });
    expect(version.stderr).toContain("unknown option '--verison'; did you mean '--version'?");
    const router = await peerops(['session', 'list', '--routr', 'fra1']);
    expect(router.code).toBe(2);
    expect(router.stderr).toContain("unknown option '--routr'; did you mean '--router'?");
    const help = await runCli(['help', 'sesion'], { url, home });
    expect(help.stderr).toContain("unknown command 'sesion'; did you mean 'session'?");
  });

  it('help <command> prints that command usage for every command', async () => {
    const top = await runCli(['help'], { url, home });
    const commands = [...top.stdout.matchAll(/^ {2}(\w+) /gm)].map((m) => m[1] ?? '');
    expect(commands).toEqual(expect.arrayContaining(['serve', 'agent', 'session', 'admin', 'completion']));
    for (const command of commands) {
      const help = await runCli(['help', command], { url, home });
      const own = await runCli([command, '--help'], { url, home });
      expect(help.code, command).toBe(0);
      expect(help.stdout, command).toBe(own.stdout);
      expect(help.stdout, command).toContain(`peerops ${command}`);
      expect(help.stdout, command).not.toBe(top.stdout);
    }
  }, 60_000);
});

describe('field errors', () => {
  it('say in words what a pattern field takes, never the regular expression', async () => {
    const add = await peerops(
      [
        'admin',
        'router',
        'add',
        'FRA!',
        '--display-name',
        'Frankfurt',
        '--node-id',
        '1',
        '--region',
        'eu central',
        '--endpoint-host',
        'fra1.example.net',
        '--public-key',
        wgKey(),
        '--link-local',
        'fe80::1',
        '--loopback-ipv6',
        'fd42:4242:53::1',
      ],
      { token: admin },
    );
    expect(add.code).toBe(1);
    expect(add.stderr).toContain(
      'add /name: must be a name of lower-case letters, digits and -, starting with a letter, at most 31 (such as fra1)',
    );
    expect(add.stderr).toContain(
      '/region (--region): must be lower-case letters, digits and -, starting with a letter or digit',
    );
    expect(add.stderr).not.toMatch(/pattern|\^\[/);
    const create = await peerops(
      [
        'session',
        'create',
        '--router',
        'x_y',
        '--ipv6',
        'fd42:1234::1',
        '--link-local',
        'fe80::1234',
        '--public-key',
        wgKey(),
      ],
      { token: admin },
    );
    expect(create.stderr).toContain(
      'create /router (--router): must be a UUID or a name of lower-case letters, digits and -',
    );
  });
});

describe('auto-approve without a DN42 registry', () => {
  const routerFlags = (name: string, nodeId: number) => [
    'admin',
    'router',
    'add',
    name,
    '--display-name',
    name,
    '--node-id',
    String(nodeId),
    '--region',
    'eu-central',
    '--endpoint-host',
    `${name}.example.net`,
    '--public-key',
    wgKey(),
    '--link-local',
    'fe80::1',
    '--loopback-ipv6',
    `fd42:4242:53::${nodeId}`,
    '--auto-approve',
  ];

  it('is refused in words naming the flag; a router that has it makes serve warn at start', async () => {
    const data = join(home, 'auto-approve');
    // the operator's opt-in first, as an install that trusted its peers had it
    const trusting = new ControllerProcess(data, await freePort(), {
      PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY: 'true',
    });
    await trusting.start();
    const token = (
      await peerops(['admin', 'token', '--data', data, '--asn', '4242420000', '--admin'], {
        url: trusting.base,
      })
    ).stdout.trim();
    const added = await peerops(routerFlags('fra7', 7), { token, url: trusting.base });
    expect(added.code, added.stderr).toBe(0);
    expect(await trusting.stop()).toBe(0);

    const plain = new ControllerProcess(data, await freePort());
    await plain.start();
    try {
      expect(plain.output).toContain('autoApprove is set but has no effect');
      expect(plain.output).toContain('"routers":["fra7"]');
      const list = await peerops(['admin', 'router', 'list'], { token, url: plain.base });
      expect(list.stdout).toMatch(/^fra7 .* no \(set; needs a registry\) /m);
      const refused = await peerops(routerFlags('fra8', 8), { token, url: plain.base });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        '/autoApprove (--auto-approve): would approve sessions whose addresses nothing checks: set PEEROPS_REGISTRY',
      );
    } finally {
      await plain.kill();
    }
  });
});

describe('shell completion', () => {
  /** What bash completes for `line` (ending in the word being typed) with the script of `peerops completion bash`. */
  async function complete(
    line: string,
    env: Record<string, string>,
  ): Promise<{ words: string[]; ms: number }> {
    const started = Date.now();
    const { stdout } = await exec(
      'bash',
      [
        '-c',
        `eval "$(peerops completion bash)"
read -ra COMP_WORDS <<< "$LINE"; [[ $LINE == *' ' ]] && COMP_WORDS+=("")
COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _peerops; printf '%s\\n' "\${COMPREPLY[@]}"`,
      ],
      { env: { ...process.env, ...env, LINE: line }, timeout: 20_000 },
    );
    return { words: stdout.split('\n').filter(Boolean), ms: Date.now() - started };
  }

  it('completes session UUIDs, router names and contexts from the current context, and nothing when it is away', async () => {
    const bin = join(home, 'bin');
    await exec('mkdir', ['-p', bin]);
    await writeFile(
      join(bin, 'peerops'),
      `#!/bin/sh\nexec '${process.execPath}' '${resolve('bin/peerops.ts')}' "$@"\n`,
    );
    await chmod(join(bin, 'peerops'), 0o755);
    // the current context: admin token --save, as the quick start does
    const saved = await peerops([
      'admin',
      'token',
      '--data',
      join(home, 'data'),
      '--asn',
      '4242420000',
      '--admin',
      '--save',
    ]);
    expect(saved.code).toBe(0);
    const key = wgKey();
    const router = await peerops([
      'admin',
      'router',
      'add',
      'fra1',
      '--display-name',
      'Frankfurt',
      '--node-id',
      '1',
      '--region',
      'eu',
      '--endpoint-host',
      'fra1.example.net',
      '--public-key',
      key,
      '--link-local',
      'fe80::1',
      '--loopback-ipv6',
      'fd42:4242:53::1',
    ]);
    expect(router.code).toBe(0);
    const created = await peerops([
      'session',
      'create',
      '--router',
      'fra1',
      '--ipv6',
      'fd42:1234::1',
      '--link-local',
      'fe80::1234',
      '--public-key',
      wgKey(),
      '-o',
      'json',
    ]);
    expect(created.code).toBe(0);
    const uuid = (JSON.parse(created.stdout) as { uuid: string }).uuid;
    const env = {
      PATH: `${bin}:${process.env.PATH ?? ''}`,
      PEEROPS_CONFIG_DIR: join(home, 'config'),
      PEEROPS_URL: '',
      PEEROPS_TOKEN: '',
    };
    expect((await complete('peerops session show ', env)).words).toEqual([uuid]);
    expect((await complete(`peerops session config ${uuid.slice(0, 4)}`, env)).words).toEqual([uuid]);
    expect((await complete('peerops admin session approve ', env)).words).toEqual([uuid]);
    expect((await complete('peerops session create --router ', env)).words).toEqual(['fra1']);
    expect((await complete('peerops admin router remove f', env)).words).toEqual(['fra1']);
    const context = `AS4242420000@${new URL(url).host}`;
    expect((await complete('peerops context use ', env)).words).toEqual([context]);
    expect((await complete('peerops routers --context ', env)).words).toEqual([context]);

    // the controller away: nothing completed, no error in the command line, within the 2 s bound
    await controller.kill();
    const away = await complete('peerops session show ', env);
    expect(away.words).toEqual([]);
    expect(away.ms).toBeLessThan(5_000);
    await controller.start();
  }, 60_000);
});

describe('the agent unit', () => {
  it('names documentation that an npm install and the .deb have', async () => {
    const docs = (text: string) => [...text.matchAll(/^Documentation=(.*)$/gm)].map((m) => m[1] ?? '');
    const unit = docs(await readFile('agent/peerops-agent.service', 'utf8'));
    // npm's two usual global prefixes; the package ships docs/*.md (package.json "files")
    expect(unit).toEqual([
      'file:///usr/lib/node_modules/peerops/docs/agent.md',
      'file:///usr/local/lib/node_modules/peerops/docs/agent.md',
    ]);
    const files = (JSON.parse(await readFile('package.json', 'utf8')) as { files: string[] }).files;
    expect(files).toContain('docs/*.md');
    await stat('docs/agent.md');
    // the .deb's drop-in replaces them with the copy the package installs (scripts/build-deb.ts)
    const deb = docs(await readFile('packaging/deb/peerops-agent.service.d/debian.conf', 'utf8'));
    expect(deb).toEqual(['', 'file:///usr/share/doc/peerops-agent/agent.md']);
    expect(await readFile('scripts/build-deb.ts', 'utf8')).toContain('usr/share/doc/${DEB_PACKAGE}/agent.md');
  });
});
