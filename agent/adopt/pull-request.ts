/**
 * `peerops adopt --pull-request` (docs/gitops.md, "Adopted sessions by pull request"): the plan's session
 * manifests on a new branch of the network's GitOps repository, pushed with the git program, and a pull
 * request for it opened on the forge, so that the network's reviewers and CI (`peerops validate`) judge
 * the adoption before it is merged. The credentials reach git in its environment, never its arguments.
 */
import { execFile } from 'node:child_process';
import { access, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { GitCredentials } from '../../common/git-remote.ts';
import { parseManifest } from '../../common/manifests.ts';
import { openPullRequest, type Forge, type OpenedPullRequest } from './forge.ts';
import { sessionManifest } from './manifests.ts';
import type { PlannedSession } from './plan.ts';

const run = promisify(execFile);

export interface PullRequestTarget {
  forge: Forge;
  /** The repository's HTTPS URL, without credentials. */
  url: string;
  credentials: GitCredentials;
  /** The branch the pull request merges into. */
  base: string;
  /** The new branch that holds the manifests. */
  branch: string;
}

/** What a pull request proposes: the sessions, and what the plan leaves with each reason. */
export interface ProposedPlan {
  sessions: PlannedSession[];
  notAdopted: readonly { text: string }[];
}

export interface Proposed {
  pull: OpenedPullRequest;
  /** The manifests the branch adds. */
  added: string[];
  /** Plan sessions whose manifest the base branch already holds: left as they are. */
  present: string[];
}

/** GitHub's limit on a pull request's body is 65,536 characters; the table stops short of it. */
const BODY_LIMIT = 60_000;

/** `adopt/<router>-<UTC date and time>`: a new branch on every run, so a rerun never meets an old one. */
export function defaultBranch(router: string, now = new Date()): string {
  const stamp = now.toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '-');
  return `adopt/${router}-${stamp}`;
}

const cell = (v: string | number | undefined) => String(v ?? '-').replace(/\|/g, '\\|');

function row(s: PlannedSession): string {
  return `| ${[
    s.asn,
    s.adopted.interface,
    s.listenPort,
    s.linkLocal,
    s.ipv6,
    s.ipv4,
    s.endpoint,
    s.mpbgp ? 'yes' : 'no',
    s.adopted.protocols.join(', '),
    s.adopted.files.join(', '),
  ]
    .map(cell)
    .join(' | ')} |`;
}

/** The pull request's title and body: each session to adopt, each thing left and why, each file kept. */
export function describe(router: string, plan: ProposedPlan, added: PlannedSession[], present: string[]) {
  const title = `Adopt ${added.length} session${added.length === 1 ? '' : 's'} of router ${router}`;
  const head = [
    `\`peerops adopt\` read router ${router}'s hand-made WireGuard and BIRD files and proposes these sessions.`,
    'Once merged, the controller marks them adopted and they wait for an admin to approve them; only then',
    'does the agent take them over, keeping their interfaces, ports, keys and BIRD protocols (no flap).',
    '',
    `### Sessions to adopt (${added.length})`,
    '',
    '| ASN | interface | port | link-local | IPv6 | IPv4 | endpoint | MP-BGP | BIRD protocols | files |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  const tail: string[] = [];
  if (plan.notAdopted.length > 0)
    tail.push(
      '',
      `### Not adopted (${plan.notAdopted.length})`,
      '',
      ...plan.notAdopted.map((n) => `- ${n.text}`),
    );
  if (present.length > 0)
    tail.push(
      '',
      `### Already in the repository (${present.length}), left as they are`,
      '',
      ...present.map((p) => `- \`${p}\``),
    );
  const lines = [...head];
  let size = [...head, ...tail].join('\n').length;
  for (const [i, s] of added.entries()) {
    const line = row(s);
    if (size + line.length > BODY_LIMIT) {
      lines.push('', `… and ${added.length - i} more: see the files of this pull request.`);
      break;
    }
    lines.push(line);
    size += line.length + 1;
  }
  return { title, body: [...lines, ...tail].join('\n') };
}

/** git with the credentials as an HTTP header for this repository's URL only, set in the environment. */
function gitEnv(target: PullRequestTarget): NodeJS.ProcessEnv {
  const { username, password } = target.credentials;
  const basic = Buffer.from(`${username}:${password}`).toString('base64');
  return {
    ...process.env,
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: `http.${target.url}.extraHeader`,
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
}

/** Runs git; a failure says what git said (its words hold the URL, never the credentials). */
async function git(cwd: string, env: NodeJS.ProcessEnv, what: string, ...args: string[]): Promise<string> {
  try {
    return (await run('git', args, { cwd, env, maxBuffer: 16 * 1024 * 1024 })).stdout;
  } catch (err) {
    const { stderr } = err as { stderr?: string };
    const said = (stderr || (err as Error).message).trim();
    throw new Error(`${what}: ${said.split('\n').slice(-3).join(' ')}`, { cause: err });
  }
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

/** Pushes the plan's manifests on a new branch and opens the pull request. */
export async function proposeAdoption(
  router: string,
  plan: ProposedPlan,
  target: PullRequestTarget,
): Promise<Proposed> {
  // judged as the store will judge them (schema, layout) before anything is written or pushed: a plan
  // file may have been edited, and its router and ASN name the files' paths
  for (const [i, s] of plan.sessions.entries()) {
    const { path, text } = sessionManifest(s);
    const parsed = parseManifest(path, text);
    if (!parsed.ok)
      throw new Error(
        `session ${i} (${path}): ${parsed.errors.map((e) => `${e.pointer}: ${e.message}`).join('; ')}`,
      );
  }
  const env = gitEnv(target);
  const dir = await mkdtemp(join(tmpdir(), 'peerops-adopt-'));
  try {
    const work = join(dir, 'repository');
    await git(
      dir,
      env,
      `cannot fetch branch ${target.base} of ${target.url}`,
      'clone',
      '--quiet',
      '--depth=1',
      '--single-branch',
      `--branch=${target.base}`,
      '--',
      target.url,
      work,
    );
    const added: PlannedSession[] = [];
    const present: string[] = [];
    for (const s of plan.sessions) {
      const { path, text } = sessionManifest(s);
      const file = join(work, path);
      // a session the repository holds already is the network's: the plan does not overwrite it
      if (await exists(file)) {
        present.push(path);
        continue;
      }
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, text);
      added.push(s);
    }
    if (added.length === 0)
      throw new Error(
        `branch ${target.base} holds every session of the plan already (${present.length}): nothing to propose`,
      );
    const { title, body } = describe(router, plan, added, present);
    await git(work, env, 'git add', 'add', '--', 'sessions');
    // the router's operator seldom has a git identity as root: one that says what made the commit
    const named = await git(work, env, 'git config', 'config', 'user.email').catch(() => '');
    const identity = named.trim()
      ? []
      : ['-c', 'user.name=peerops adopt', '-c', `user.email=adopt@${router}.invalid`];
    await git(
      work,
      env,
      'git commit',
      ...identity,
      'commit',
      '--quiet',
      '-m',
      title,
      '-m',
      'Made by peerops adopt --pull-request.',
    );
    await git(
      work,
      env,
      `cannot push branch ${target.branch} to ${target.url}`,
      'push',
      '--quiet',
      'origin',
      `HEAD:refs/heads/${target.branch}`,
    );
    const pull = await openPullRequest(target.forge, target.url, target.credentials.password, {
      title,
      body,
      head: target.branch,
      base: target.base,
    });
    return { pull, added: added.map((s) => sessionManifest(s).path), present };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
