/**
 * The forge repository on the command line and in the environment (docs/gitops.md, "Following a forge"):
 * the branch, the HTTPS URL and the credentials beside it, checked by one set of rules for the controller
 * that follows the forge (`peerops serve --git-remote`) and for `peerops adopt --pull-request`.
 */
import { readFileSync } from 'node:fs';
import { redactUrl } from './redact.ts';

const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost']);

export interface GitCredentials {
  username: string;
  password: string;
}

/** A secret from `<NAME>_FILE` (a mounted Secret) or `<NAME>`; trailing newlines dropped. */
export function secret(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const file = env[`${name}_FILE`];
  if (file) {
    try {
      return readFileSync(file, 'utf8').replace(/[\r\n]+$/, '');
    } catch (err) {
      throw new Error(`${name}_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code})`, {
        cause: err,
      });
    }
  }
  return env[name] || undefined;
}

/** A branch name peerops reads or writes: no `..`, no option-like start, not the status branch. */
export function isUsableBranch(branch: string): boolean {
  return (
    /^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$/.test(branch) && !branch.includes('..') && branch !== 'peerops-status'
  );
}

/** `--git-branch` or PEEROPS_GIT_BRANCH (default main): the branch people merge into. */
export function gitBranch(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  const branch = flag ?? (env.PEEROPS_GIT_BRANCH || 'main');
  if (!isUsableBranch(branch)) throw new Error(`--git-branch: '${branch}' is not a usable branch name`);
  return branch;
}

/**
 * The repository URL (HTTPS; plain HTTP only to a loopback address when credentials go with it) and the
 * credentials of PEEROPS_GIT_CREDENTIALS(_FILE): `user:token`, or a bare token sent as the password of
 * `x-access-token`. A URL carrying credentials is refused: logs and `ps` would show them.
 */
export function gitRemote(
  url: string,
  env: NodeJS.ProcessEnv,
): { url: string; credentials?: GitCredentials } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`--git-remote: '${redactUrl(url)}' is not a URL`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')
    throw new Error(
      '--git-remote: the store speaks git over HTTP(S) only (https://forge.example/org/repo.git)',
    );
  if (parsed.username || parsed.password)
    throw new Error(
      '--git-remote: put credentials in PEEROPS_GIT_CREDENTIALS_FILE (user:token), not in the URL, where logs would show them',
    );
  const text = secret(env, 'PEEROPS_GIT_CREDENTIALS');
  let credentials: GitCredentials | undefined;
  if (text !== undefined) {
    const colon = text.indexOf(':');
    // a bare token is sent as the password of `x-access-token`, which GitHub, Gitea and Forgejo accept
    credentials =
      colon < 0
        ? { username: 'x-access-token', password: text }
        : { username: text.slice(0, colon), password: text.slice(colon + 1) };
  }
  if (credentials && parsed.protocol === 'http:' && !LOOPBACK.has(parsed.hostname))
    throw new Error('--git-remote: credentials go over https:// only');
  return { url, ...(credentials ? { credentials } : {}) };
}
