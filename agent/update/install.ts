/**
 * Download, verification and the swap of a release artifact:
 *   1. the artifact streams into a temp file beside the installed one, hashed on the way;
 *   2. its SHA256 must equal the line for it in the release's SHA256SUMS, whose SSH signature
 *      (SHA256SUMS.sig, signature.ts) must verify with a key of autoUpdate.publicKeys; else it is deleted
 *      (refused);
 *   3. the new file is run with `--version` and must print the release's version;
 *   4. the installed file is kept as `peerops.previous.mjs` (hard link) and the new one renamed over it:
 *      an atomic replace, so the path never lacks a working file. rollback() undoes it.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, link, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { MIRROR_CAPS, readCapped, streamCapped } from './capped.ts';
import type { Release } from './releases.ts';
import { UpdateError } from './releases.ts';
import { checksumsSignatureProblem, SIGNATURE_NAME } from './signature.ts';

const execFileP = promisify(execFile);

/** The agent artifact and the checksum list of a release (scripts/build-release.ts writes both). */
export const ARTIFACT_NAME = 'peerops.mjs';
export const CHECKSUMS_NAME = 'SHA256SUMS';

/** `peerops.mjs` → `peerops.previous.mjs`: still a module Node runs, for a rollback by hand too. */
export function previousPath(installPath: string): string {
  const ext = path.extname(installPath);
  return `${installPath.slice(0, installPath.length - ext.length)}.previous${ext}`;
}

function asset(release: Release, name: string): string {
  const a = release.assets.find((x) => x.name === name);
  if (!a) throw new UpdateError(`release ${release.tag_name} has no asset '${name}'`);
  return a.browser_download_url;
}

/** `<sha256>  <name>` lines (sha256sum format; a `*` before the name marks binary mode). */
export function parseChecksums(text: string): Map<string, string> {
  const sums = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^([0-9a-fA-F]{64}) [ *](.+)$/.exec(line.trim());
    if (m) sums.set(m[2]!.trim(), m[1]!.toLowerCase());
  }
  return sums;
}

/** The artifact's SHA256 from the release's SHA256SUMS, once its signature verified with a trusted key. */
export async function fetchExpectedSha256(
  release: Release,
  publicKeys: readonly string[],
  timeoutMs: number,
): Promise<string> {
  const fetchSmall = (name: string, cap: number): Promise<Buffer> =>
    readCapped({ url: asset(release, name), what: `${name} of ${release.tag_name}`, cap, timeoutMs });
  const checksums = await fetchSmall(CHECKSUMS_NAME, MIRROR_CAPS.checksums);
  const signature = (await fetchSmall(SIGNATURE_NAME, MIRROR_CAPS.signature)).toString('utf8');
  const problem = checksumsSignatureProblem(checksums, signature, publicKeys);
  if (problem !== undefined)
    throw new UpdateError(
      `${SIGNATURE_NAME} of ${release.tag_name} does not show ${CHECKSUMS_NAME} signed by a key of autoUpdate.publicKeys (${problem}): refused`,
    );
  const sum = parseChecksums(checksums.toString('utf8')).get(ARTIFACT_NAME);
  if (!sum)
    throw new UpdateError(`${CHECKSUMS_NAME} of ${release.tag_name} has no line for ${ARTIFACT_NAME}`);
  return sum;
}

/** Downloads the artifact next to `installPath`; resolves with the temp file and its SHA256. */
export async function downloadArtifact(
  release: Release,
  installPath: string,
  timeoutMs: number,
): Promise<{ file: string; sha256: string }> {
  const body = streamCapped({
    url: asset(release, ARTIFACT_NAME),
    what: `${ARTIFACT_NAME} of ${release.tag_name}`,
    cap: MIRROR_CAPS.artifact,
    timeoutMs,
  });
  const file = path.join(
    path.dirname(installPath),
    `.${path.basename(installPath)}.${process.pid}.download.mjs`,
  );
  const hash = createHash('sha256');
  const fh = await open(file, 'w', 0o600);
  try {
    for await (const chunk of body) {
      hash.update(chunk);
      await fh.write(chunk);
    }
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(file, { force: true });
    throw err;
  }
  await fh.close();
  return { file, sha256: hash.digest('hex') };
}

/** Runs the new artifact with `--version` (under the running Node) and checks what it prints. */
export async function checkRuns(file: string, expectedVersion: string, timeoutMs = 30_000): Promise<void> {
  let stdout: string;
  try {
    ({ stdout } = await execFileP(process.execPath, [file, '--version'], { timeout: timeoutMs }));
  } catch (err) {
    throw new UpdateError(`the new artifact does not run: ${(err as Error).message.slice(0, 500)}`);
  }
  const printed = stdout.trim();
  if (printed !== expectedVersion) {
    throw new UpdateError(
      `the new artifact says it is '${printed.slice(0, 64)}', expected ${expectedVersion}`,
    );
  }
}

/** Keeps the installed file as previousPath() and renames `newFile` over it (atomic replace). */
export async function swapInstall(installPath: string, newFile: string): Promise<void> {
  const mode = (await stat(installPath)).mode & 0o777;
  await chmod(newFile, mode);
  const previous = previousPath(installPath);
  await rm(previous, { force: true });
  await link(installPath, previous);
  await rename(newFile, installPath);
}

/** Puts the previous file back in place. */
export async function rollback(installPath: string): Promise<void> {
  await rename(previousPath(installPath), installPath);
}
