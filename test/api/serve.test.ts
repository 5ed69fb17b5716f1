/**
 * `peerops serve` as a real process: key file created 0600, listens, one JSON log line per request without
 * secrets (an agent's routine requests at debug, PEEROPS_LOG_LEVEL), and SIGTERM releases long polls,
 * finishes in-flight requests and exits 0.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { freePort } from '../support/ports.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
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

describe('peerops serve', () => {
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
