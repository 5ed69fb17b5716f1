/**
 * Fetching a registry over a transport isomorphic-git lacks (ssh, file://) with the git command, into
 * the same bare mirror the registry reads with isomorphic-git (docs/login.md, A DN42 registry).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Never ask: no terminal prompt for a password, and ssh in batch mode (an unknown host key or a key with
 * a passphrase fails the fetch with ssh's reason instead of hanging). An operator's own GIT_SSH_COMMAND
 * or GIT_SSH (another key, another known_hosts) is kept.
 */
function gitEnv(): NodeJS.ProcessEnv {
  const own = process.env.GIT_SSH_COMMAND !== undefined || process.env.GIT_SSH !== undefined;
  return {
    ...process.env,
    GIT_TERMINAL_PROMPT: '0',
    ...(own ? {} : { GIT_SSH_COMMAND: 'ssh -o BatchMode=yes' }),
  };
}

/** The git command's version line; throws naming what is missing when there is no git on PATH. */
export async function gitVersion(): Promise<string> {
  try {
    return (await run('git', ['--version'], { env: gitEnv() })).stdout.trim();
  } catch (err) {
    throw new Error(`the git command cannot be run (${(err as Error).message})`, { cause: err });
  }
}

export interface GitFetch {
  gitdir: string;
  url: string;
  /** The branch; default the remote's HEAD. */
  ref?: string | undefined;
  /** Shallow depth, for the first fetch only. */
  depth?: number | undefined;
  timeoutMs: number;
}

/** Fetch one branch and return its commit. Errors carry git's own reason. */
export async function gitFetch(f: GitFetch): Promise<string> {
  const args = ['--git-dir', f.gitdir, 'fetch', '--quiet', '--no-tags', '--no-write-fetch-head'];
  if (f.depth !== undefined) args.push('--depth', String(f.depth));
  // Into a ref of its own: the good branch moves only once the commit is checked (registry.ts).
  args.push('--', f.url, `+${f.ref ?? 'HEAD'}:refs/peerops/fetched`);
  const opts = { env: gitEnv(), timeout: f.timeoutMs, killSignal: 'SIGKILL' as const };
  try {
    await run('git', args, opts);
    const { stdout } = await run(
      'git',
      ['--git-dir', f.gitdir, 'rev-parse', '--verify', 'refs/peerops/fetched^{commit}'],
      opts,
    );
    return stdout.trim();
  } catch (err) {
    const e = err as Error & { stderr?: string; killed?: boolean };
    if (e.killed) throw new Error(`git fetch took longer than ${f.timeoutMs} ms`, { cause: err });
    // The first line is the cause (`fatal: '…' does not appear to be a git repository`, ssh's
    // `connect to host … Connection refused`); the rest is git's advice for every failure.
    const said = (e.stderr ?? '').trim().split('\n')[0]?.trim();
    throw new Error(`git fetch failed: ${said || e.message}`, { cause: err });
  }
}
