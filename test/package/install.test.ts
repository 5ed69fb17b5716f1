/**
 * The npm package as a user gets it: `npm pack` (prepack builds dist/peerops.js), then
 * `npm install -g --prefix <tmp>` of the tarball under Node 20 (the machine's own `node`), 22 (fetched
 * from the registry into a temp prefix) and 24 (the dev dependency), and the installed `peerops` run on
 * that Node: --version, validate of a GitOps fixture, session list against a controller (the repo's own,
 * on Node 24), serve answering /health, and the agent reaching its preflight; `peerops agent` runs on
 * node with the agent's options (agent/node-args.ts), the other commands without. Prints how long each
 * install takes. bin/peerops.ts holds the Node versions each command needs.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { routerFields, sessionFields } from '../api/helpers.ts';
import { AGENT_NODE_ARGS } from '../../agent/node-args.ts';
import { nodeArgsProbe } from '../support/node-args-probe.ts';
import { freePort } from '../support/ports.ts';

const REPO = join(import.meta.dirname, '..', '..');
const NODE24 = join(REPO, 'node_modules', 'node', 'bin', 'node');
const FIXTURE = join(REPO, 'test', 'fixtures', 'validate', 'good');

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end. npm's own variables (the test runs under npx) are left out. */
function runCmd(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {},
): Promise<Result> {
  const env = Object.fromEntries(
    Object.entries({ ...process.env, ...opts.env }).filter(([k]) => !k.toLowerCase().startsWith('npm_')),
  );
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, cwd: opts.cwd ?? REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 90_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The first executable `name` on PATH outside node_modules (the machine's, not the dev dependency). */
async function machineProgram(name: string): Promise<string> {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir || dir.includes('node_modules')) continue;
    try {
      const file = join(dir, name);
      if ((await stat(file)).isFile()) return file;
    } catch {
      // not here
    }
  }
  throw new Error(`no ${name} on PATH outside node_modules`);
}

async function timed<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const value = await fn();
  console.log(`${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return value;
}

let work: string;
let tarball: string;
let npmCli: string;
let version: string;
const nodes = new Map<string, string>(); // '20' | '22' | '24' → node binary
let controller: ReturnType<typeof spawn> | undefined;
let controllerOutput = '';
let base: string;
let userToken: string;
let sessionUuid: string;

async function startController(): Promise<void> {
  const data = join(work, 'controller');
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  controller = spawn(
    NODE24,
    [join(REPO, 'bin', 'peerops.ts'), 'serve', '--listen', `127.0.0.1:${port}`, '--data', data],
    { env: { ...process.env, PEEROPS_STORE: 'git' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  controller.stdout?.on('data', (d: Buffer) => (controllerOutput += d.toString()));
  controller.stderr?.on('data', (d: Buffer) => (controllerOutput += d.toString()));
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      if ((await fetch(`${base}/health`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the controller did not start:\n${controllerOutput}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const tokens = await TokenIssuer.fromFile(defaultKeyPath(data));
  const admin = tokens.issueToken(4242420000, 'admin').token;
  userToken = tokens.issueToken(4242421234, 'user').token;
  const post = async (path: string, token: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  await post('/admin/policy', admin, { action: 'set', spec: { dn42Asn: 4242420000 } });
  await post('/admin/router', admin, { action: 'add', ...routerFields('fra1') });
  sessionUuid = String((await post('/session', userToken, sessionFields('fra1'))).uuid);
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'peerops-package-'));
  version = (JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
  npmCli = join(dirname(await realpath(await machineProgram('npm'))), 'npm-cli.js');
  nodes.set('20', await machineProgram('node'));
  nodes.set('24', NODE24);
  await Promise.all([
    timed('npm pack (prepack builds dist/peerops.js)', async () => {
      const r = await runCmd('npm', ['pack', '--pack-destination', work, '--loglevel=error']);
      if (r.code !== 0) throw new Error(`npm pack failed: ${r.stderr}`);
      const file = (await readdir(work)).find((f) => f.endsWith('.tgz'));
      if (!file) throw new Error(`npm pack made no tarball: ${r.stdout}`);
      tarball = join(work, file);
    }),
    timed('fetch Node 22 (npm install node@22)', async () => {
      const prefix = join(work, 'node22');
      const r = await runCmd('npm', ['install', '--prefix', prefix, 'node@22', '--no-audit', '--no-fund']);
      if (r.code !== 0) throw new Error(`npm install node@22 failed: ${r.stderr}`);
      nodes.set('22', join(prefix, 'node_modules', 'node', 'bin', 'node'));
    }),
    startController(),
  ]);
}, 180_000);

afterAll(async () => {
  controller?.kill('SIGKILL');
  if (work) await rm(work, { recursive: true, force: true });
});

describe('the packed tarball', () => {
  it('holds the bundle and what an operator installs, none of the sources or dev tooling', async () => {
    const r = await runCmd('tar', ['tzf', tarball]);
    const files = r.stdout.trim().split('\n').sort();
    expect(files).toContain('package/dist/peerops.js');
    expect(files).toContain('package/agent/peerops-agent.service');
    expect(files.filter((f) => /\.ts$|^package\/(test|scripts|controller|cli|common|bin)\//.test(f))).toEqual(
      [],
    );
    const pkg = JSON.parse((await runCmd('tar', ['xzOf', tarball, 'package/package.json'])).stdout) as Record<
      string,
      unknown
    >;
    expect(pkg.private).toBeUndefined();
    expect(pkg.dependencies ?? {}).toEqual({}); // everything is inside the bundle
    expect((await runCmd('tar', ['xzOf', tarball, 'package/dist/peerops.js'])).stdout).toMatch(
      /^#!\/usr\/bin\/env node\n/,
    );
  });
});

describe.each(['20', '22', '24'])('installed with npm install -g under Node %s', (major) => {
  let prefix: string;
  let env: NodeJS.ProcessEnv;
  const peerops = (args: string[], extra: NodeJS.ProcessEnv = {}) =>
    runCmd(join(prefix, 'bin', 'peerops'), args, { env: { ...env, ...extra }, cwd: work });

  beforeAll(async () => {
    const node = nodes.get(major);
    if (!node) throw new Error(`no Node ${major}`);
    // PATH holds this Node as `node` and the install's bin: `#!/usr/bin/env node` finds this one
    const nodeDir = join(work, `node-${major}-bin`);
    await mkdir(nodeDir);
    await symlink(node, join(nodeDir, 'node'));
    prefix = join(work, `prefix-${major}`);
    env = { PATH: [nodeDir, join(prefix, 'bin')].join(delimiter), HOME: join(work, `home-${major}`) };
    const nodeVersion = (await runCmd(node, ['--version'])).stdout.trim();
    const r = await timed(`npm install -g of the tarball under Node ${nodeVersion}`, () =>
      runCmd(
        node,
        [
          npmCli,
          'install',
          '-g',
          '--prefix',
          prefix,
          tarball,
          '--no-audit',
          '--no-fund',
          '--no-update-notifier',
          '--loglevel=error',
        ],
        { env },
      ),
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  }, 120_000);

  it('peerops --version', async () => {
    const r = await peerops(['--version']);
    expect(r).toMatchObject({ code: 0, stdout: `${version}\n`, stderr: '' });
  });

  it('peerops validate <GitOps repo>', async () => {
    const r = await peerops(['validate', FIXTURE]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // the summary line; what precedes it is validate's own business (docs/store.md)
    expect(r.stdout).toMatch(/^peerops validate: ok: 2 router\(s\), 3 session\(s\)/m);
  });

  it('peerops session list against a controller', async () => {
    const r = await peerops(['session', 'list', '--url', base, '--token', userToken]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(sessionUuid);
    expect(r.stdout).toMatch(/fra1/);
  });

  it('peerops serve answers /health and stops on SIGTERM', async () => {
    const port = await freePort();
    const data = join(work, `serve-${major}`);
    const probe = await nodeArgsProbe(work);
    const envs = Object.fromEntries(
      Object.entries({ ...process.env, ...env, ...probe.env, PEEROPS_STORE: 'git' }).filter(
        ([k]) => !k.startsWith('npm_'),
      ),
    );
    const child = spawn(
      join(prefix, 'bin', 'peerops'),
      ['serve', '--listen', `127.0.0.1:${port}`, '--data', data],
      {
        env: envs,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const res = await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined);
        if (res?.ok) {
          expect(await res.json()).toEqual({ status: 'ok' });
          break;
        }
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error(`serve did not answer:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      // The web portal is baked into the package (docs/decisions.md, "Web portal"): page and script.
      const page = await fetch(`http://127.0.0.1:${port}/`);
      expect(page.status).toBe(200);
      const script = /src="(\/assets\/app-[A-Z0-9]+\.js)"/.exec(await page.text())?.[1];
      expect(script).toBeDefined();
      expect((await fetch(`http://127.0.0.1:${port}${script}`)).status).toBe(200);
      // and the API reference page's script (controller/api/reference.ts)
      expect((await fetch(`http://127.0.0.1:${port}/docs/redoc.standalone.js`)).status).toBe(200);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      // the controller keeps V8's compilers: none of the agent's Node options
      const seen = await probe.seen();
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.flatMap((p) => p.execArgv)).toEqual([]);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('peerops agent runs its preflight (no router programs on this PATH: exit 78, one line each)', async () => {
    const dir = join(work, `agent-${major}`);
    await mkdir(join(dir, 'bird'), { recursive: true });
    const config = join(dir, 'agent.json');
    await writeFile(
      config,
      JSON.stringify({
        node: { name: 'fra1' },
        controlPlane: { url: 'http://127.0.0.1:9', token: 'package-test-token-0123456789' },
        routing: {
          peerConfDir: join(dir, 'bird', 'peers'),
          ibgpConfDir: join(dir, 'bird', 'ibgp.d'),
          controlSocket: join(dir, 'bird', 'bird.ctl'),
        },
      }),
      { mode: 0o600 },
    );
    const r = await peerops(['agent', '--config', config]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('peerops agent: bird not found on PATH: install bird2\n');
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });

  it("peerops agent runs on node with the agent's options (Node >= 22.15 runs itself again), the CLI without", async () => {
    const probe = await nodeArgsProbe(work);
    const r = await peerops(['agent', '--config', join(work, 'no-such-agent.json')], probe.env);
    expect(r.code).toBe(1); // after the options: it could not read the config
    const agent = await probe.seen();
    if (major === '20') {
      // no process.execve: the agent runs on the options it was started with
      expect(agent.map((p) => p.execArgv)).toEqual([[]]);
    } else {
      expect(agent.map((p) => p.execArgv)).toEqual([[], [...AGENT_NODE_ARGS]]);
      expect(agent[1]?.pid).toBe(agent[0]?.pid); // replaced in place (execve): what systemd watches
    }
    // PEEROPS_AGENT_NODE_ARGS empty: none (docs/agent.md, Memory)
    const off = await nodeArgsProbe(work);
    await peerops(['agent', '--config', join(work, 'no-such-agent.json')], {
      ...off.env,
      PEEROPS_AGENT_NODE_ARGS: '',
    });
    expect((await off.seen()).map((p) => p.execArgv)).toEqual([[]]);
    const cli = await nodeArgsProbe(work);
    expect((await peerops(['--version'], cli.env)).code).toBe(0);
    expect((await cli.seen()).map((p) => p.execArgv)).toEqual([[]]);
  });

  if (major === '20')
    it('peerops serve with the Kubernetes store says which Node it needs', async (ctx) => {
      const [m = 0, n = 0] = (await runCmd(nodes.get(major) ?? '', ['-p', 'process.versions.node'])).stdout
        .trim()
        .split('.')
        .map(Number);
      if (m > 22 || (m === 22 && n >= 19)) ctx.skip(); // the machine's node is no older one
      const r = await peerops(['serve', '--data', join(work, 'k8s')], { PEEROPS_STORE: 'kubernetes' });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /^peerops serve with the Kubernetes store needs Node >= 22\.19; this is v20\.\d+\.\d+ \(the git store runs on it\)\n$/,
      );
    });
});
