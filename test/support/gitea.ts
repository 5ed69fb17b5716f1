/**
 * A real Gitea on loopback for forge tests: the binary scripts/gitea-tools.sh builds (cached in
 * .cache/gitea-bin/), its database in sqlite and its repositories in a temp dir, one admin user and an
 * access token, made with Gitea's own `admin` commands. Stopped and removed by close().
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './ports.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');

export class Gitea {
  readonly user = 'peerops';
  token = '';
  url = '';
  private dir = '';
  private bin = '';
  private process: ChildProcess | undefined;
  private log = '';

  private async admin(...args: string[]): Promise<string> {
    const { stdout } = await run(this.bin, ['--config', join(this.dir, 'app.ini'), 'admin', ...args], {
      cwd: this.dir,
    });
    return stdout;
  }

  async start(): Promise<void> {
    const { stdout } = await run('bash', [join(ROOT, 'scripts', 'gitea-tools.sh')], {
      maxBuffer: 16 * 1024 * 1024,
    });
    this.bin = stdout.trim().split('\n').at(-1)!;
    this.dir = await mkdtemp(join(tmpdir(), 'peerops-gitea-'));
    const port = await freePort();
    this.url = `http://127.0.0.1:${port}`;
    // root runs the tests (network namespaces): Gitea refuses root unless told this
    await writeFile(
      join(this.dir, 'app.ini'),
      `APP_NAME = peerops test forge
RUN_USER = ${process.env.USER ?? 'root'}
RUN_MODE = prod
WORK_PATH = ${this.dir}
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true
[database]
DB_TYPE = sqlite3
PATH = ${join(this.dir, 'gitea.db')}
[server]
HTTP_ADDR = 127.0.0.1
HTTP_PORT = ${port}
ROOT_URL = ${this.url}/
DISABLE_SSH = true
OFFLINE_MODE = true
STATIC_ROOT_PATH = ${dirname(this.bin)}
APP_DATA_PATH = ${join(this.dir, 'data')}
[repository]
ROOT = ${join(this.dir, 'repositories')}
DEFAULT_BRANCH = main
[security]
INSTALL_LOCK = true
SECRET_KEY = peerops-test-forge-secret-key
[log]
MODE = console
LEVEL = Warn
[service]
DISABLE_REGISTRATION = true
`,
    );
    await run(this.bin, ['--config', join(this.dir, 'app.ini'), 'migrate'], { cwd: this.dir });
    await this.admin(
      'user',
      'create',
      `--username=${this.user}`,
      '--password=peerops-Test-1234',
      '--email=peerops@example.org',
      '--admin',
      '--must-change-password=false',
    );
    // the last word of the last line: Gitea's warning about root comes first on stdout
    const token = await this.admin(
      'user',
      'generate-access-token',
      `--username=${this.user}`,
      '--token-name=adopt',
      '--scopes=write:repository,write:user',
      '--raw',
    );
    this.token = token.trim().split(/\s+/).at(-1)!;
    this.process = spawn(this.bin, ['--config', join(this.dir, 'app.ini'), 'web'], {
      cwd: this.dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (chunk: Buffer) => void (this.log = (this.log + chunk.toString()).slice(-8000));
    this.process.stdout?.on('data', keep);
    this.process.stderr?.on('data', keep);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const up = await fetch(`${this.url}/api/v1/version`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      if (this.process.exitCode !== null || Date.now() > deadline)
        throw new Error(`gitea did not answer on ${this.url}:\n${this.log}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  /** A call to Gitea's REST API as the admin user; throws on a non-2xx answer. */
  async api<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(`${this.url}/api/v1${path}`, {
      method,
      headers: { authorization: `token ${this.token}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`gitea ${method} ${path}: HTTP ${res.status}: ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  async close(): Promise<void> {
    if (this.process && this.process.exitCode === null) {
      const exited = new Promise((r) => this.process?.once('exit', r));
      this.process.kill('SIGTERM');
      await exited;
    }
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }
}
