/**
 * Release listing in the GitHub releases API format (`GET {base}/repos/{owner}/{repo}/releases`), from
 * the real service or any mirror that answers the same way, and the choice of release for a channel:
 *   stable  releases that are neither marked prerelease nor carry a semver prerelease tag
 *   beta    stable ones plus prereleases tagged `-beta…` or `-rc…`
 *   dev     every release that is not a draft
 * The newest version above the running one wins (semver order).
 */
import semver from 'semver';
import { MIRROR_CAPS, readCapped } from './capped.ts';

export type UpdateChannel = 'stable' | 'beta' | 'dev';

export interface ReleaseAsset {
  name: string;
  browser_download_url: string;
}

export interface Release {
  tag_name: string;
  prerelease: boolean;
  draft: boolean;
  assets: ReleaseAsset[];
}

export class UpdateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UpdateError';
  }
}

export const GITHUB_API = 'https://api.github.com';

/**
 * `owner/repo` → the GitHub API; `https://mirror.example/api/owner/repo` → that base URL (everything
 * before the last two path segments) with the same paths. Resolves to the listing URL.
 */
export function releasesUrl(releaseRepo: string): string {
  const segment = /^[A-Za-z0-9_.-]+$/;
  if (/^https?:\/\//.test(releaseRepo)) {
    let url: URL;
    try {
      url = new URL(releaseRepo);
    } catch {
      throw new UpdateError(`autoUpdate.releaseRepo '${releaseRepo}' is not a valid URL`);
    }
    const parts = url.pathname.split('/').filter(Boolean);
    const [owner, repo] = parts.slice(-2);
    if (parts.length < 2 || !owner || !repo || !segment.test(owner) || !segment.test(repo)) {
      throw new UpdateError(
        `autoUpdate.releaseRepo '${releaseRepo}' must end in /<owner>/<repo> (the base URL comes before them)`,
      );
    }
    const base = `${url.origin}${parts.length > 2 ? `/${parts.slice(0, -2).join('/')}` : ''}`;
    return `${base}/repos/${owner}/${repo}/releases`;
  }
  const [owner, repo, ...rest] = releaseRepo.split('/');
  if (!owner || !repo || rest.length > 0 || !segment.test(owner) || !segment.test(repo)) {
    throw new UpdateError(
      `autoUpdate.releaseRepo '${releaseRepo}' must be <owner>/<repo> or a URL ending in it`,
    );
  }
  return `${GITHUB_API}/repos/${owner}/${repo}/releases`;
}

export async function fetchReleases(releaseRepo: string, timeoutMs = 30_000): Promise<Release[]> {
  const url = releasesUrl(releaseRepo);
  const text = await readCapped({
    url,
    what: `release listing ${url}`,
    cap: MIRROR_CAPS.listing,
    timeoutMs,
    headers: { accept: 'application/vnd.github+json', 'user-agent': 'peerops-agent' },
  });
  let body: unknown;
  try {
    body = JSON.parse(text.toString('utf8'));
  } catch {
    throw new UpdateError(`release listing ${url} is not JSON`);
  }
  if (!Array.isArray(body)) throw new UpdateError(`release listing ${url} is not a JSON array`);
  return body.filter(isRelease);
}

function isRelease(v: unknown): v is Release {
  const r = v as Partial<Release> | null;
  return (
    !!r &&
    typeof r.tag_name === 'string' &&
    typeof r.prerelease === 'boolean' &&
    typeof r.draft === 'boolean' &&
    Array.isArray(r.assets) &&
    r.assets.every((a) => typeof a?.name === 'string' && typeof a?.browser_download_url === 'string')
  );
}

/** The release's version (tag without a leading `v`), or undefined when the tag is not semver. */
export function releaseVersion(release: Pick<Release, 'tag_name'>): string | undefined {
  return semver.valid(release.tag_name.replace(/^v/, '')) ?? undefined;
}

export function onChannel(release: Release, channel: UpdateChannel): boolean {
  if (release.draft) return false;
  const version = releaseVersion(release);
  if (!version) return false;
  const pre = semver.prerelease(version);
  if (channel === 'dev') return true;
  if (channel === 'stable') return !release.prerelease && pre === null;
  const tag = String(pre?.[0] ?? '');
  return (!release.prerelease && pre === null) || /^(beta|rc)/.test(tag);
}

/** The newest release of the channel that is newer than `current`, if any. */
export function selectRelease(
  releases: readonly Release[],
  channel: UpdateChannel,
  current: string,
): { release: Release; version: string } | undefined {
  const running = semver.valid(current.replace(/^v/, ''));
  let best: { release: Release; version: string } | undefined;
  for (const release of releases) {
    if (!onChannel(release, channel)) continue;
    const version = releaseVersion(release) as string;
    if (running && !semver.gt(version, running)) continue;
    if (!best || semver.gt(version, best.version)) best = { release, version };
  }
  return best;
}
