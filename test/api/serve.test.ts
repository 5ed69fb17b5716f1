/**
 * `peerops serve` as a real process: key file created 0600, listens, one JSON log line per request without
 * secrets (an agent's routine requests at debug, PEEROPS_LOG_LEVEL), and SIGTERM releases long polls,
 * finishes in-flight requests and exits 0.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { generateKeyPairSync } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { freePort } from '../support/ports.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LISTEN_BACKLOG } from '../../controller/app.ts';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import { runPeerops } from '../cli/run.ts';
import { routerFields } from './helpers.ts';

let dir: string;
let child: ChildProcess;
let base: string;
let output = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-serve-'));
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  child = spawn(
    process.execPath,
    ['bin/peerops.ts', 'serve', '--listen', `127.0.0.1:${port}`, '--data', dir],
    {
      env: { ...process.env, PEEROPS_STORE: 'git', PEEROPS_LOG_LEVEL: 'debug' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${base}/health`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`serve did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
});

afterAll(async () => {
  if (child.exitCode === null) child.kill('SIGKILL');
  await rm(dir, { recursive: true, force: true });
});

/** Runs the CLI to its end against the git store unless `env` says otherwise: exit status and output. */
const runGitPeerops = (args: string[], env: Record<string, string> = {}) =>
  runPeerops(args, { PEEROPS_STORE: 'git', ...env });

describe('peerops serve', () => {
  it('a start that cannot work ends with one line naming the cause and exit 1, no stack trace', async () => {
    const spare = await mkdtemp(join(tmpdir(), 'peerops-serve-bad-'));
    try {
      const file = join(spare, 'a-file');
      await writeFile(file, 'x');
      const port = new URL(base).port;
      const cases: [string[], Record<string, string>, RegExp][] = [
        [
          ['--listen', `127.0.0.1:${port}`, '--data', join(spare, 'd1')],
          {},
          /cannot listen on 127\.0\.0\.1:\d+: the address is in use/,
        ],
        [['--listen', '127.0.0.1:0', '--data', file], {}, /data dir .*a-file is not a directory/],
        [
          ['--listen', '127.0.0.1:0', '--data', join(spare, 'd2')],
          { PEEROPS_JWT_KEY_FILE: join(spare, 'nokey.pem') },
          /no JWT key at .*nokey\.pem/,
        ],
        [
          ['--listen', '127.0.0.1:0', '--data', join(spare, 'd3')],
          { PEEROPS_REGISTRY: join(spare, 'no-registry') },
          /\/\S*no-registry: no such file or directory/,
        ],
      ];
      for (const [args, env, reason] of cases) {
        const r = await runGitPeerops(['serve', ...args], env);
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toMatch(new RegExp(`^peerops serve: ${reason.source}`, 'm'));
        expect(r.stderr).not.toMatch(/^\s+at /m);
      }
      // a token is minted with the controller's key or not at all
      const empty = await runGitPeerops([
        'admin',
        'token',
        '--data',
        join(spare, 'd4'),
        '--asn',
        '4242420000',
      ]);
      expect(empty.code).toBe(1);
      expect(empty.stderr).toMatch(/no JWT key at .*d4\/jwt-ed25519\.pem/);
      const viaEnv = await runGitPeerops(['admin', 'token', '--asn', '4242420000'], { PEEROPS_DATA: dir });
      expect(viaEnv.code, viaEnv.stderr).toBe(0);
      expect(
        (await TokenIssuer.fromExistingFile(defaultKeyPath(dir))).verify(viaEnv.stdout.trim()),
      ).toMatchObject({ asn: 4242420000 });
    } finally {
      await rm(spare, { recursive: true, force: true });
    }
  });

  it('uses a 0400 key (a Secret mount, read-only) as it is; tightens one others can read to 0600', async () => {
    const spare = await mkdtemp(join(tmpdir(), 'peerops-key-'));
    try {
      const pem = generateKeyPairSync('ed25519')
        .privateKey.export({ format: 'pem', type: 'pkcs8' })
        .toString();
      const mounted = join(spare, 'mounted.pem');
      await writeFile(mounted, pem, { mode: 0o400 });
      await TokenIssuer.fromExistingFile(mounted);
      expect((await stat(mounted)).mode & 0o777).toBe(0o400);
      const loose = join(spare, 'loose.pem');
      await writeFile(loose, pem);
      await chmod(loose, 0o644);
      await TokenIssuer.fromExistingFile(loose);
      expect((await stat(loose)).mode & 0o777).toBe(0o600);
    } finally {
      await rm(spare, { recursive: true, force: true });
    }
  });

  it('listens with room for a fleet reconnecting at once (the accept queue, ss)', async () => {
    const port = new URL(base).port;
    const { stdout } = await promisify(execFile)('ss', ['-ltnH', `sport = :${port}`]);
    // a listening socket's Send-Q is its backlog: LISTEN_BACKLOG, within net.core.somaxconn
    const somaxconn = Number((await readFile('/proc/sys/net/core/somaxconn', 'utf8')).trim());
    expect(stdout.trim().split(/\s+/)[2]).toBe(String(Math.min(LISTEN_BACKLOG, somaxconn)));
  });
  it('creates the JWT key with mode 0600 and serves with it', async () => {
    const keyPath = defaultKeyPath(dir);
    expect((await stat(keyPath)).mode & 0o777).toBe(0o600);
    const admin = (await TokenIssuer.fromFile(keyPath)).issueToken(4242420000, 'admin').token;
    const res = await fetch(`${base}/admin/router`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${admin}` },
      body: JSON.stringify({ action: 'add', ...routerFields('fra1') }),
    });
    expect(res.status).toBe(200);
    const { agentToken } = (await res.json()) as { agentToken: string };

    const refused = await fetch(`${base}/agent/fra1/sessions`, {
      headers: { authorization: 'Bearer not-the-token' },
    });
    expect(refused.status).toBe(401);
    const first = await fetch(`${base}/agent/fra1/sessions`, {
      headers: { authorization: `Bearer ${agentToken}` },
    });
    const etag = first.headers.get('etag') as string;
    const poll = fetch(`${base}/agent/fra1/sessions?wait=60`, {
      headers: { authorization: `Bearer ${agentToken}`, 'if-none-match': etag },
    });
    await new Promise((r) => setTimeout(r, 300));

    const started = Date.now();
    child.kill('SIGTERM');
    const res2 = await poll;
    expect(res2.status).toBe(304);
    const code = await new Promise<number | null>((resolve) => {
      if (child.exitCode !== null) resolve(child.exitCode);
      else child.once('exit', (c) => resolve(c));
    });
    expect(code).toBe(0);
    expect(Date.now() - started).toBeLessThan(15_000);

    const lines = output.split('\n').filter((l) => l.startsWith('{'));
    const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    expect(requests.find((l) => l.route === '/admin/router')).toMatchObject({
      status: 200,
      method: 'POST',
      level: 30,
    });
    // an agent's routine requests are debug lines (the default level, info, leaves them out); refusals info
    expect(requests.find((l) => l.route === '/agent/:router/sessions' && l.status === 200)).toMatchObject({
      level: 20,
    });
    expect(requests.find((l) => l.route === '/agent/:router/sessions' && l.status === 401)).toMatchObject({
      level: 30,
    });
    expect(output).not.toContain(agentToken);
    expect(output).not.toContain(admin);
    expect(output).toContain('"msg":"stopped"');
  });
});

/** A `peerops serve` of its own, with its combined output, resolved once `ready` matches the output. */
async function serveUntil(data: string, port: number, ready: RegExp) {
  const proc = spawn(
    process.execPath,
    ['bin/peerops.ts', 'serve', '--listen', `127.0.0.1:${port}`, '--data', data],
    { env: { ...process.env, PEEROPS_STORE: 'git' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const log = { text: '' };
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve never logged ${ready}:\n${log.text}`)), 30_000);
    const read = (b: Buffer) => {
      log.text += b.toString();
      if (ready.test(log.text)) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout.on('data', read);
    proc.stderr.on('data', read);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { proc, log, exited };
}

describe('peerops serve, shutdown', () => {
  it('a request in flight at SIGTERM (its body still arriving) and one after it on its connection are answered; then exit 0', async () => {
    const data = await mkdtemp(join(tmpdir(), 'peerops-serve-inflight-'));
    const port = await freePort();
    const serve = await serveUntil(data, port, /peerops controller listening/);
    try {
      const admin = (await TokenIssuer.fromFile(defaultKeyPath(data))).issueToken(4242420000, 'admin').token;
      const body = JSON.stringify({ action: 'add', ...routerFields('ams9') });
      const socket = connect(port, '127.0.0.1');
      let answer = '';
      socket.on('data', (b: Buffer) => (answer += b.toString()));
      const closed = new Promise((resolve) => socket.once('close', resolve));
      await new Promise((resolve) => socket.once('connect', resolve));
      // headers and half the body: the request has begun when the signal arrives
      socket.write(
        `POST /admin/router HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n` +
          body.slice(0, 40),
      );
      await new Promise((r) => setTimeout(r, 300));
      serve.proc.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      // the rest of the body, without closing our side (a client waiting for its answer), and a second
      // request on the same connection that reaches the server while it drains
      socket.write(`${body.slice(40)}GET /health HTTP/1.1\r\nHost: x\r\n\r\n`);
      await closed;
      const [first, second] = answer.split(/(?=HTTP\/1\.1 )/);
      expect(first).toMatch(/^HTTP\/1\.1 200 /);
      const json = JSON.parse((first ?? '').slice((first ?? '').indexOf('\r\n\r\n') + 4)) as {
        router: { name: string };
      };
      expect(json.router.name).toBe('ams9');
      // served as any other request, and told that the connection closes
      expect(second).toMatch(/^HTTP\/1\.1 200 /);
      expect(second).toMatch(/\r\nconnection: close\r\n/i);
      expect(await serve.exited).toEqual({ code: 0, signal: null });
      expect(serve.log.text).toContain('"msg":"stopped"');
    } finally {
      if (serve.proc.exitCode === null) serve.proc.kill('SIGKILL');
      await rm(data, { recursive: true, force: true });
    }
  });

  it('a SIGTERM while the store is still opening stops cleanly once the start is done (exit 0)', async () => {
    const data = await mkdtemp(join(tmpdir(), 'peerops-serve-early-'));
    const port = await freePort();
    // this warning is written after the store is open and before the API listens
    const serve = await serveUntil(data, port, /PEEROPS_REGISTRY is not set/);
    try {
      serve.proc.kill('SIGTERM');
      expect(await serve.exited).toEqual({ code: 0, signal: null });
      expect(serve.log.text).toContain('"signal":"SIGTERM"');
      expect(serve.log.text).toContain('"msg":"stopped"');
    } finally {
      if (serve.proc.exitCode === null) serve.proc.kill('SIGKILL');
      await rm(data, { recursive: true, force: true });
    }
  });
});
