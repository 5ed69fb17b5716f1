/**
 * Probation after a self-update, so that a release which installs but cannot run is undone without an
 * operator. The updater writes `peerops.probation` (`<version> 0`) beside the artifact before it exits
 * for the restart. The release launcher (scripts/build-release.ts), not the new bundle, counts every
 * agent start in that file: a broken bundle cannot be trusted to judge itself. The agent deletes the
 * file after its first good pass. On the start after PROBATION_STARTS starts without one, the launcher
 * moves `peerops.previous.mjs` back over `peerops.mjs` and appends the version to `peerops.rejected`,
 * which the updater never installs again.
 */
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { atomicWriteFile } from '../../common/atomic-write.ts';

export const PROBATION_NAME = 'peerops.probation';
export const REJECTED_NAME = 'peerops.rejected';
/** Starts a new version gets to complete one good pass (systemd restarts every 5 s). */
export const PROBATION_STARTS = 3;

const beside = (installPath: string, name: string) => path.join(path.dirname(installPath), name);

export async function startProbation(installPath: string, version: string): Promise<void> {
  await atomicWriteFile(beside(installPath, PROBATION_NAME), `${version} 0\n`);
}

/** Ends the probation of the running version; answers the version it confirmed, if one was on probation. */
export async function endProbation(installPath: string): Promise<string | undefined> {
  const file = beside(installPath, PROBATION_NAME);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  await rm(file, { force: true });
  return text.split(/\s+/)[0] || undefined;
}

/** Versions the launcher rolled back. */
export async function rejectedVersions(installPath: string): Promise<Set<string>> {
  try {
    const text = await readFile(beside(installPath, REJECTED_NAME), 'utf8');
    return new Set(
      text
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean),
    );
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
    throw err;
  }
}
