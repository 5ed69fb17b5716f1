/**
 * `peerops adopt --undo` beside a running agent (docs/agent.md, Taking the peers over): the real command
 * finds the agent's health port answering (an HTTP server on loopback stands in for the agent's) and
 * refuses, touching nothing; a file set aside stays aside.
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..', '..');
let dir: string;
let server: Server;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'undo-guard-'));
  server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

it('refuses while the agent answers, and moves nothing back', async () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  const record = join(dir, 'wireguard', 'peerops-adopted');
  await mkdir(record, { recursive: true });
  const aside = join(dir, 'wg0.conf.peerops-adopted');
  await writeFile(aside, '[Interface]\n');
  await writeFile(
    join(record, 'record.json'),
    JSON.stringify({ links: [], setAside: [{ from: join(dir, 'wg0.conf'), to: aside }] }),
  );
  const config = join(dir, 'agent.json');
  await writeFile(
    config,
    JSON.stringify({
      server: { listen: `127.0.0.1:${port}` },
      node: { name: 'r1' },
      controlPlane: { url: 'http://127.0.0.1:9', token: 'x'.repeat(32) },
      routing: { peerConfDir: join(dir, 'bird', 'peers'), controlSocket: join(dir, 'bird.ctl') },
      tunnel: { configDir: join(dir, 'wireguard') },
    }),
    { mode: 0o600 },
  );
  const r = await run(process.execPath, [
    join(ROOT, 'bin', 'peerops.ts'),
    'adopt',
    '--undo',
    `--config=${config}`,
  ]).then(
    () => ({ code: 0, stderr: '' }),
    (err: { code: number; stderr: string }) => err,
  );
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(`the agent answers on 127.0.0.1:${port}: stop it first`);
  expect(await readFile(aside, 'utf8')).toBe('[Interface]\n');
});
