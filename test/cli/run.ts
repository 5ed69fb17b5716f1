/** The `peerops` command from this checkout, run as a user runs it, for the CLI tests. */
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `peerops <args>` against the controller at `url`, its configuration under `<home>/config`, with
 * `token` as PEEROPS_TOKEN when given; the exit code and what it printed (a failure is a result too).
 */
export async function runCli(
  args: string[],
  opts: { url: string; home: string; token?: string | undefined },
): Promise<CliResult> {
  try {
    const { stdout, stderr } = await exec(process.execPath, ['bin/peerops.ts', ...args], {
      env: {
        ...process.env,
        PEEROPS_URL: opts.url,
        PEEROPS_CONFIG_DIR: join(opts.home, 'config'),
        ...(opts.token ? { PEEROPS_TOKEN: opts.token } : {}),
      },
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as CliResult;
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/**
 * Runs `peerops <args>` to its end with `env` over this process's environment: its exit status (null
 * when a signal ended it) and what it printed.
 */
export function runPeerops(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['bin/peerops.ts', ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    p.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    p.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
