/** The real git command-line tool for store tests; the smart-HTTP server is test/support/git-http.ts. */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';

const exec = promisify(execFile);

const GIT_ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: 'Reviewer',
  GIT_AUTHOR_EMAIL: 'reviewer@example.org',
  GIT_COMMITTER_NAME: 'Reviewer',
  GIT_COMMITTER_EMAIL: 'reviewer@example.org',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
};

export async function git(cwd: string, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await exec('git', args, { cwd, env: GIT_ENV, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    // some commands (fsck) say what is wrong on stdout, which execFile's message leaves out
    const { stdout } = err as { stdout?: string };
    if (stdout) (err as Error).message += `\nstdout: ${stdout}`;
    throw err;
  }
}

/** Write a file (creating directories) inside a work tree. */
export async function put(worktree: string, path: string, content: string | object): Promise<void> {
  const file = join(worktree, path);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, typeof content === 'string' ? content : dump(content));
}

/** The file at ref:path in a bare repository, undefined when there is none. */
export async function show(gitDir: string, ref: string, path: string): Promise<string | undefined> {
  return git(gitDir, 'show', `${ref}:${path}`).catch(() => undefined);
}

/**
 * Poll until check() returns a truthy value, at most timeoutMs. `explain` adds what the failure needs
 * to be read (what was awaited, a process's recent output).
 */
export async function eventually<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 8000,
  explain: () => string = () => 'condition',
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${explain()} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
