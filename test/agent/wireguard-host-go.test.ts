/**
 * The Go WireGuard host's own table tests (wireguard-host/*_test.go: the dump's parsing, the control
 * protocol between command and host), run with `go test` so that `npm test` runs them; Go's test cache
 * makes a run over unchanged sources instant.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const exec = promisify(execFile);
const MODULE = join(import.meta.dirname, '..', '..', 'wireguard-host');

it('go test passes in wireguard-host', async () => {
  const run = await exec('go', ['test', './...'], {
    cwd: MODULE,
    // the modules go.sum pins, as scripts/build-wireguard-host.sh builds with
    env: { ...process.env, GOFLAGS: '-mod=readonly -buildvcs=false' },
  }).then(
    (r) => ({ code: 0, output: r.stdout + r.stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({
      code: err.code ?? 1,
      output: `${err.stdout ?? ''}${err.stderr ?? ''}`,
    }),
  );
  expect(run.code, run.output).toBe(0);
  expect(run.output).toMatch(/^ok\s+peerops\/wireguard-host/m);
}, 180_000);
