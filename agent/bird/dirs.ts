/**
 * The include directories the main config globs (peers/, ibgp.d/, local.d/, …). BIRD refuses a config
 * whose `include "<dir>/*.conf"` names a directory that does not exist, and on Debian it reads the
 * files as user bird: a directory the agent makes gets the config root's group and its group/other
 * permission bits (root:bird 0750 under Debian's bird:bird 0750 /etc/bird), see docs/agent.md.
 */
import { chmod, chown, mkdir, stat } from 'node:fs/promises';

/** Creates `dir` (and missing parents) when it is missing; answers whether it did. */
export async function ensureIncludeDir(dir: string, root: string): Promise<boolean> {
  try {
    if ((await stat(dir)).isDirectory()) return false;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const parent = await stat(root);
  await mkdir(dir, { recursive: true });
  // mkdir's mode passes through the umask; chmod sets exactly what BIRD needs to read the files.
  await chmod(dir, 0o700 | (parent.mode & 0o055));
  if ((await stat(dir)).gid !== parent.gid) await chown(dir, -1, parent.gid);
  return true;
}

/** ensureIncludeDir for each; answers the directories it created. */
export async function ensureIncludeDirs(dirs: readonly string[], root: string): Promise<string[]> {
  const created: string[] = [];
  for (const dir of new Set(dirs)) if (await ensureIncludeDir(dir, root)) created.push(dir);
  return created;
}
