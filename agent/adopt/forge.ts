/**
 * Opening a pull request on the forge that holds the network's GitOps repository (docs/gitops.md,
 * "Adopted sessions by pull request"). GitHub, Gitea and Forgejo, and GitLab each have their own REST
 * call: path, field names, authorisation header and answer differ.
 */

export const FORGES = ['github', 'gitea', 'forgejo', 'gitlab'] as const;
export type Forge = (typeof FORGES)[number];

export const isForge = (name: string): name is Forge => (FORGES as readonly string[]).includes(name);

export interface PullRequest {
  title: string;
  body: string;
  /** The branch holding the change. */
  head: string;
  /** The branch it merges into. */
  base: string;
}

export interface OpenedPullRequest {
  /** The pull request's number (GitLab: the merge request's `iid`). */
  number: number;
  /** Its page on the forge. */
  url: string;
}

/** A forge's answer is read up to this much: a pull request's JSON is a few KiB. */
const ANSWER_LIMIT = 1024 * 1024;
const REQUEST_TIMEOUT_MS = 30_000;

/** The forge a repository URL is on when its host says so; otherwise `--forge` must. */
export function forgeOfHost(url: string): Forge | undefined {
  const host = new URL(url).hostname;
  return host === 'github.com' ? 'github' : host === 'gitlab.com' ? 'gitlab' : undefined;
}

interface Call {
  endpoint: string;
  headers: Record<string, string>;
  body: Record<string, string>;
  answer: (json: Record<string, unknown>) => OpenedPullRequest;
}

/** The forge's REST call that opens `pr` on the repository at `repoUrl` (https://host/owner/repo.git). */
function call(forge: Forge, repoUrl: string, token: string, pr: PullRequest): Call {
  const url = new URL(repoUrl);
  const segments = url.pathname
    .replace(/\.git\/?$/, '')
    .split('/')
    .filter(Boolean);
  if (segments.length < 2)
    throw new Error(`--git-remote: ${url.host}${url.pathname} names no owner/repository`);
  const num = (v: unknown) => (typeof v === 'number' ? v : Number.NaN);
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  if (forge === 'gitlab') {
    // a project's path may hold nested groups; GitLab takes it URL-encoded as the project's id
    return {
      endpoint: `${url.origin}/api/v4/projects/${encodeURIComponent(segments.join('/'))}/merge_requests`,
      headers: { 'PRIVATE-TOKEN': token },
      body: { source_branch: pr.head, target_branch: pr.base, title: pr.title, description: pr.body },
      answer: (j) => ({ number: num(j.iid), url: str(j.web_url) }),
    };
  }
  const [owner, repo] = segments.slice(-2);
  const root = `${url.origin}${segments.length > 2 ? `/${segments.slice(0, -2).join('/')}` : ''}`;
  const fields = { title: pr.title, body: pr.body, head: pr.head, base: pr.base };
  const answer = (j: Record<string, unknown>) => ({ number: num(j.number), url: str(j.html_url) });
  if (forge === 'github') {
    // github.com's API has its own host; GitHub Enterprise Server serves it under /api/v3
    const api = url.hostname === 'github.com' ? 'https://api.github.com' : `${root}/api/v3`;
    return {
      endpoint: `${api}/repos/${owner}/${repo}/pulls`,
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/vnd.github+json',
        'x-github-api-version': '2022-11-28',
      },
      body: fields,
      answer,
    };
  }
  // Gitea and Forgejo (a fork of Gitea) share the API
  return {
    endpoint: `${root}/api/v1/repos/${owner}/${repo}/pulls`,
    headers: { authorization: `token ${token}` },
    body: fields,
    answer,
  };
}

/** The forge's words on a refusal: `message`, and GitHub's `errors[].message`. */
function refusal(text: string): string {
  try {
    const j = JSON.parse(text) as { message?: unknown; errors?: { message?: unknown }[] };
    const details = (j.errors ?? []).map((e) => e.message).filter((m) => typeof m === 'string');
    const words = [typeof j.message === 'string' ? j.message : '', ...details].filter(Boolean).join('; ');
    if (words) return words;
  } catch {
    // not JSON: an HTML error page, shown in part
  }
  return text.replace(/\s+/g, ' ').slice(0, 200);
}

/** Opens the pull request; throws an Error saying what the forge answered. The token is never in it. */
export async function openPullRequest(
  forge: Forge,
  repoUrl: string,
  token: string,
  pr: PullRequest,
): Promise<OpenedPullRequest> {
  const c = call(forge, repoUrl, token, pr);
  const res = await fetch(c.endpoint, {
    method: 'POST',
    headers: { ...c.headers, 'content-type': 'application/json', 'user-agent': 'peerops-adopt' },
    body: JSON.stringify(c.body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  }).catch((err: unknown) => {
    throw new Error(`the forge (${new URL(c.endpoint).host}) cannot be reached: ${(err as Error).message}`);
  });
  const text = (await res.text()).slice(0, ANSWER_LIMIT);
  if (!res.ok) throw new Error(`the forge refused the pull request: HTTP ${res.status}: ${refusal(text)}`);
  let opened: OpenedPullRequest;
  try {
    opened = c.answer(JSON.parse(text) as Record<string, unknown>);
  } catch {
    opened = { number: Number.NaN, url: '' };
  }
  if (!Number.isInteger(opened.number) || !opened.url)
    throw new Error(`the forge answered HTTP ${res.status} without a pull request's number and URL`);
  return opened;
}
