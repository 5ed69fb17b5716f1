/**
 * What an agent killed in the middle of a pass leaves in the directories it writes (docs/agent.md,
 * "Files and links the agent owns"): temp files of atomic writes (`<name>.<hex>.tmp`, one per file
 * being written), a check's staging dir, a write probe, and the marker that says BIRD has not been
 * configured on the files swapped in. The agent removes them at start, before its first pass; that pass
 * configures BIRD when the marker was among them (bird/apply.ts).
 */
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { isTempName } from '../../common/atomic-write.ts';
import { CONFIGURE_PENDING, STAGING_PREFIX } from '../bird/apply.ts';
import { PROBE_PREFIX } from './preflight.ts';

/** The random-suffixed names the agent gives its staging dirs and write probes. */
const OWN_PREFIXED = [STAGING_PREFIX, PROBE_PREFIX].map(
  (prefix) => new RegExp(`^${prefix.replaceAll('.', '\\.')}[0-9a-f]{8}$`),
);

/** A name only the agent gives; an operator's own file never matches. */
export function isLeftover(name: string): boolean {
  return isTempName(name) || name === CONFIGURE_PENDING || OWN_PREFIXED.some((re) => re.test(name));
}

export interface Leftovers {
  /** Directory → the names removed from it (only directories that had some). */
  removed: Map<string, string[]>;
  count: number;
}

/** Removes every leftover directly in each of `dirs` (a missing dir has none). */
export async function removeLeftovers(dirs: readonly string[]): Promise<Leftovers> {
  const removed = new Map<string, string[]>();
  let count = 0;
  for (const dir of new Set(dirs)) {
    const names = (await readdir(dir).catch(() => [])).filter(isLeftover).sort();
    for (const name of names) await rm(join(dir, name), { recursive: true, force: true });
    if (names.length) removed.set(dir, names);
    count += names.length;
  }
  return { removed, count };
}
