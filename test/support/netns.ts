/**
 * Network-namespace lab for integration tests: namespaces, veth pairs, commands inside a namespace, BIRD
 * with its own config and control socket, and cleanup of everything the lab made (also after a failure).
 *
 *   const lab = new NetnsLab('ag');               // names start with the area prefix + pid/random part
 *   const a = await lab.namespace('node');         // `ag<id>-node`, loopback up
 *   const b = await lab.namespace('peer');
 *   await lab.veth(a, b, { a: 'fd00::1/64', b: 'fd00::2/64' });
 *   await a.run('ip', ['-j', 'link']);           // throws with stderr on a non-zero exit
 *   const bird = await lab.startBird(b, 'router id 10.0.0.2; …');  // bird.socket, bird.birdc('show protocols')
 *   afterAll(() => lab.cleanup());
 *
 * Processes started in a namespace that daemonize (wireguard-go) are found with `ip netns pids` and
 * killed at cleanup. wireguard-go's UAPI sockets live in the shared /var/run/wireguard: interface
 * names must be unique across test files that run in parallel (use `lab.uniquePort()` for `wg_<port>`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion; never throws for a non-zero exit (see `run` for that). */
export function exec(
  cmd: string,
  args: readonly string[],
  opts: { timeoutMs?: number; input?: string } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
    if (child.stdin) {
      child.stdin.on('error', () => undefined); // a command that exits without reading its input
      child.stdin.end(opts.input);
    }
  });
}

async function mustRun(cmd: string, args: readonly string[]): Promise<string> {
  const r = await exec(cmd, args);
  if (r.code !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}

export class Namespace {
  readonly name: string;
  constructor(name: string) {
    this.name = name;
  }
  /** Command inside this namespace; resolves with code/stdout/stderr. */
  exec(
    cmd: string,
    args: readonly string[] = [],
    opts: { timeoutMs?: number; input?: string } = {},
  ): Promise<RunResult> {
    return exec('ip', ['netns', 'exec', this.name, cmd, ...args], opts);
  }
  /** Command inside this namespace; throws with stderr when it fails, else resolves with stdout. */
  run(cmd: string, args: readonly string[] = []): Promise<string> {
    return mustRun('ip', ['netns', 'exec', this.name, cmd, ...args]);
  }
  /** Long-running child inside this namespace (killed by the lab at cleanup when started through it). */
  spawn(cmd: string, args: readonly string[] = [], env: NodeJS.ProcessEnv = {}): ChildProcess {
    return spawn('ip', ['netns', 'exec', this.name, cmd, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
  }
}

export interface BirdInstance {
  ns: Namespace;
  dir: string;
  configPath: string;
  socket: string;
  process: ChildProcess;
  /** `birdc -s <socket> <command…>`; resolves with stdout. */
  birdc(command: string): Promise<string>;
  stop(): Promise<void>;
}

export class NetnsLab {
  /** `<prefix><6 hex>`: namespaces are `<id>-<label>`, veths `<id><n>a`/`b` (≤ 15 characters). */
  readonly id: string;
  private readonly namespaces: Namespace[] = [];
  private readonly children: ChildProcess[] = [];
  private readonly dirs: string[] = [];
  private vethCount = 0;

  constructor(prefix: string) {
    if (!/^[a-z]{1,4}$/.test(prefix)) throw new Error('NetnsLab prefix: 1-4 lowercase letters');
    this.id = `${prefix}${(process.pid % 4096).toString(16)}${randomBytes(2).toString('hex')}`;
  }

  /** A random port in 20000..29999 for `wg_<port>` names unlikely to clash with a parallel test file. */
  uniquePort(): number {
    return 20000 + (randomBytes(2).readUInt16BE() % 10000);
  }

  async namespace(label: string): Promise<Namespace> {
    const ns = new Namespace(`${this.id}-${label}`);
    await mustRun('ip', ['netns', 'add', ns.name]);
    this.namespaces.push(ns);
    await ns.run('ip', ['link', 'set', 'lo', 'up']);
    return ns;
  }

  /** A veth pair between two namespaces, up, with optional addresses (`fd00::1/64`, `10.0.0.1/24`). */
  async veth(
    a: Namespace,
    b: Namespace,
    addrs: { a?: string; b?: string } = {},
  ): Promise<{ a: string; b: string }> {
    const n = this.vethCount++;
    const names = { a: `${this.id}${n}a`, b: `${this.id}${n}b` };
    await mustRun('ip', [
      'link',
      'add',
      names.a,
      'netns',
      a.name,
      'type',
      'veth',
      'peer',
      'name',
      names.b,
      'netns',
      b.name,
    ]);
    for (const [ns, name, addr] of [
      [a, names.a, addrs.a],
      [b, names.b, addrs.b],
    ] as const) {
      if (addr)
        await ns.run('ip', ['addr', 'add', addr, 'dev', name, ...(addr.includes(':') ? ['nodad'] : [])]);
      await ns.run('ip', ['link', 'set', name, 'up']);
    }
    // The kernel's link watch marks the carrier up asynchronously (up to a second, longer under load);
    // until then the link drops what is sent on it.
    for (const [ns, name] of [
      [a, names.a],
      [b, names.b],
    ] as const) {
      await waitFor(
        `${name} up`,
        async () => (await ns.run('ip', ['-br', 'link', 'show', 'dev', name])).includes(' UP '),
        10_000,
      );
    }
    return names;
  }

  /** A scratch directory removed at cleanup. */
  async tempDir(label = 'tmp'): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), `${this.id}-${label}-`));
    this.dirs.push(dir);
    return dir;
  }

  /** A child process inside `ns` that the lab kills at cleanup. */
  spawn(ns: Namespace, cmd: string, args: readonly string[] = [], env: NodeJS.ProcessEnv = {}): ChildProcess {
    const child = ns.spawn(cmd, args, env);
    this.children.push(child);
    return child;
  }

  /**
   * BIRD in the foreground inside `ns` with `config` (the caller's whole bird.conf) and its own socket;
   * resolves once the control socket answers. `configPath` (and `socket`) may be given to run a config
   * tree the caller wrote.
   */
  async startBird(
    ns: Namespace,
    config: string | { configPath: string; socket?: string },
  ): Promise<BirdInstance> {
    const dir = await this.tempDir('bird');
    const configPath = typeof config === 'string' ? join(dir, 'bird.conf') : config.configPath;
    if (typeof config === 'string') await writeFile(configPath, config);
    const socket = (typeof config === 'string' ? undefined : config.socket) ?? join(dir, 'bird.ctl');
    const child = this.spawn(ns, 'bird', ['-f', '-c', configPath, '-s', socket, '-P', join(dir, 'bird.pid')]);
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const birdc = (command: string) => mustRun('birdc', ['-s', socket, ...command.split(' ')]);
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`bird exited (${child.exitCode}): ${stderr.trim()}`);
      const r = await exec('birdc', ['-s', socket, 'show', 'status'], { timeoutMs: 2000 });
      if (r.code === 0 && r.stdout.includes('Daemon is up')) break;
      if (Date.now() > deadline) throw new Error(`bird did not come up: ${stderr.trim()} ${r.stdout}`);
      await new Promise((res) => setTimeout(res, 100));
    }
    return {
      ns,
      dir,
      configPath,
      socket,
      process: child,
      birdc,
      stop: () => killChild(child),
    };
  }

  /** Kills every child and every process left in the lab's namespaces, deletes them and the temp dirs. */
  async cleanup(): Promise<void> {
    await Promise.all(this.children.map((c) => killChild(c)));
    for (const ns of this.namespaces) {
      // SIGTERM first: wireguard-go removes its UAPI socket in /var/run/wireguard on a clean exit.
      for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
        const pids = await exec('ip', ['netns', 'pids', ns.name]);
        for (const pid of pids.stdout.split(/\s+/).filter(Boolean)) {
          try {
            process.kill(Number(pid), signal);
          } catch {
            // already gone
          }
        }
        if (signal === 'SIGTERM' && pids.stdout.trim()) await new Promise((res) => setTimeout(res, 500));
      }
      await exec('ip', ['netns', 'del', ns.name]);
    }
    for (const dir of this.dirs) await rm(dir, { recursive: true, force: true });
    this.namespaces.length = 0;
    this.children.length = 0;
    this.dirs.length = 0;
  }
}

function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** Polls `check` every `intervalMs` until it returns a truthy value or `timeoutMs` passes (then throws). */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${String(last as Error)}` : ''}`);
    await new Promise((res) => setTimeout(res, intervalMs));
  }
}
