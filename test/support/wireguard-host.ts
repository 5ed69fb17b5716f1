/**
 * peerops-wireguard as the agent's WireGuard for a test file (this machine's kernel has no WireGuard):
 * built by scripts/build-wireguard-host.sh, put first on PATH and named in PEEROPS_WIREGUARD.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll } from 'vitest';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..', '..');

/** Registers the build (a beforeAll, first, so the file's own hooks find it) and the unset after. */
export function useWireGuardHost(): void {
  beforeAll(async () => {
    const { stdout } = await run('bash', [join(ROOT, 'scripts', 'build-wireguard-host.sh')], {
      timeout: 600_000,
    });
    process.env.PATH = `${stdout.trim().split('\n').at(-1) ?? ''}:${process.env.PATH ?? ''}`;
    process.env.PEEROPS_WIREGUARD = 'peerops-wireguard';
  }, 660_000);
  afterAll(() => {
    delete process.env.PEEROPS_WIREGUARD;
  });
}
