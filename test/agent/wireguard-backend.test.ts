/**
 * The WireGuard backend the agent names at start: wireguard-go only when it is installed. The kernel here
 * has no WireGuard module (the netns tests run wireguard-go), so the probe falls through to wireguard-go;
 * a PATH without it must give `none`, not `wireguard-go`.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const MODULE = join(import.meta.dirname, '..', '..', 'agent', 'wireguard', 'interface.ts');
const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function backendWith(path: string): Promise<string> {
  const code = `const { detectBackend } = await import(${JSON.stringify(MODULE)}); console.log(await detectBackend());`;
  const { stdout } = await exec(process.execPath, ['--input-type=module', '-e', code], {
    env: { PATH: path },
  });
  return stdout.trim();
}

describe('detectBackend', () => {
  it('names wireguard-go when it is on PATH', async () => {
    const { stdout: kernel } = await exec('sh', [
      '-c',
      'ip link add wgkprobe type wireguard 2>/dev/null && ip link del wgkprobe && echo yes || echo no',
    ]);
    expect(await backendWith(process.env.PATH ?? '')).toBe(
      kernel.trim() === 'yes' ? 'kernel' : 'wireguard-go',
    );
  });

  it('says none when neither the kernel nor a wireguard-go on PATH can make a tunnel', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'peerops-nowg-'));
    dirs.push(dir);
    // only ip(8): the kernel probe runs, wireguard-go is not found
    const { stdout: ip } = await exec('sh', ['-c', 'command -v ip']);
    await symlink(ip.trim(), join(dir, 'ip'));
    const backend = await backendWith(dir);
    expect(['kernel', 'none']).toContain(backend);
    if (backend === 'kernel') console.log('this kernel has WireGuard: the none case is not reachable here');
  });
});
