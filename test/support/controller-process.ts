/**
 * `peerops serve` as a real child process on loopback, for tests that kill it, fill its disk or
 * restart it: start (waits for it to listen), SIGKILL or SIGTERM, and JSON requests that throw when no
 * answer comes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cp } from 'node:fs/promises';
import { join } from 'node:path';
import { TokenIssuer, defaultKeyPath, type Role } from '../../controller/auth/jwt.ts';
import { freePort } from './ports.ts';

export type Answer = { status: number; body: Record<string, unknown> };

export class ControllerProcess {
  private child: ChildProcess | undefined;
  /** What the current process printed (its log). */
  output = '';
  readonly base: string;
  private readonly dataDir: string;
  private readonly env: Record<string, string>;
  private readonly args: string[];
  /** The program node runs: the sources by default, or a release's bundle. */
  program = 'bin/peerops.ts';

  constructor(dataDir: string, port: number, env: Record<string, string> = {}, args: string[] = []) {
    this.dataDir = dataDir;
    this.base = `http://127.0.0.1:${port}`;
    this.env = env;
    this.args = args;
  }

  async start(): Promise<void> {
    this.output = '';
    const proc = spawn(
      process.execPath,
      [
        this.program,
        'serve',
        '--listen',
        this.base.slice('http://'.length),
        '--data',
        this.dataDir,
        ...this.args,
      ],
      {
        env: { ...process.env, PEEROPS_STORE: 'git', PEEROPS_LOG_LEVEL: 'info', ...this.env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    this.child = proc;
    proc.stdout.on('data', (b: Buffer) => (this.output += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (this.output += b.toString()));
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        // /livez, not /health: a controller on a read-only disk serves, with /health 503 degraded
        if ((await fetch(`${this.base}/livez`)).status === 200) return;
      } catch {
        // not listening yet
      }
      if (proc.exitCode !== null || Date.now() > deadline)
        throw new Error(`serve did not start:\n${this.output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** A token for `asn`, signed with the key the controller made in its data dir on its first start. */
  async token(asn: number, role: Role): Promise<string> {
    return (await TokenIssuer.fromExistingFile(defaultKeyPath(this.dataDir))).issueToken(asn, role).token;
  }

  async kill(): Promise<void> {
    const proc = this.child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
  }

  /** SIGTERM, as systemd stops it; resolves to the exit code once the process is gone. */
  async stop(): Promise<number | null> {
    const proc = this.child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return proc?.exitCode ?? null;
    const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
    proc.kill('SIGTERM');
    return exited;
  }

  /** A POST; throws when the connection dies (the controller was killed: no answer). */
  async post(token: string, path: string, body: unknown): Promise<Answer> {
    const res = await fetch(`${this.base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  async get(path: string, token?: string): Promise<Answer> {
    const res = await fetch(`${this.base}${path}`, {
      ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}),
      signal: AbortSignal.timeout(20_000),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }
}

/**
 * A started controller on a free port with its data in `<dir>/data`, whose logins and creates read the
 * DN42 registry copied from `registry` to `<dir>/registry` (PEEROPS_REGISTRY).
 */
export async function startWithRegistry(dir: string, registry: string): Promise<ControllerProcess> {
  await cp(registry, join(dir, 'registry'), { recursive: true });
  const controller = new ControllerProcess(join(dir, 'data'), await freePort(), {
    PEEROPS_REGISTRY: join(dir, 'registry'),
  });
  await controller.start();
  return controller;
}
