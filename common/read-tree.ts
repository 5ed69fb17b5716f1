/**
 * The trees judge-tree.ts judges, read from a directory or from git (through the git program): their
 * judged files as text, and the entries refused unread (entryProblem).
 */
import { spawn } from 'node:child_process';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { entryProblem, isJudgedPath, type Problem } from './judge-tree.ts';
import { fieldError } from './messages.ts';

/**
 * A judged file of a work tree as git would commit it: its text, or why it is refused unread (a
 * symbolic link, a file over MANIFEST_LIMITS, a directory where git holds a submodule), as
 * entryProblem refuses it in a pushed tree.
 */
async function readWorkFile(root: string, path: string): Promise<{ text: string } | { problem: Problem }> {
  const info = await lstat(join(root, path));
  const mode = info.isSymbolicLink() ? '120000' : info.isDirectory() ? '160000' : '100644';
  const problem = entryProblem(mode, info.size, path);
  if (problem !== undefined)
    return { problem: { file: path, ...fieldError('/', problem.key, problem.params) } };
  return { text: await readFile(join(root, path), 'utf8') };
}

/** The judged files under `root` (isJudgedPath), read from disk, with those refused unread. */
export async function readDirectoryTree(root: string): Promise<TreeFiles> {
  const files = new Map<string, string>();
  const refused: Problem[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(join(root, dir), { withFileTypes: true });
    for (const e of entries) {
      const path = dir ? `${dir}/${e.name}` : e.name;
      // a linked directory is not followed (it could loop): git and the store see the link itself
      if (e.isDirectory() && !e.name.startsWith('.') && e.name !== 'node_modules') await walk(path);
      else if ((e.isFile() || e.isSymbolicLink()) && isJudgedPath(path)) {
        const read = await readWorkFile(root, path);
        if ('text' in read) files.set(path, read.text);
        else refused.push(read.problem);
      }
    }
  };
  await walk('');
  return { files, refused };
}

/** Runs the git program; its stdout, or an Error carrying its stderr. */
export function runGit(args: string[], cwd?: string, input?: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) =>
      reject(
        (e as NodeJS.ErrnoException).code === 'ENOENT' ? new Error('the git program is not installed') : e,
      ),
    );
    child.on('close', (code) => {
      if (code === 0) resolve(Buffer.concat(out));
      else {
        const reason = Buffer.concat(err).toString('utf8').trim().split('\n')[0] ?? '';
        reject(new Error(`git ${args[0]}: ${reason || `exit status ${code}`}`));
      }
    });
    child.stdin.on('error', () => undefined); // git may exit before reading all of it; 'close' says why
    child.stdin.end(input ?? '');
  });
}

/** The blobs `oids` as text, read in one `git cat-file --batch`. */
async function readBlobs(oids: string[], cwd?: string): Promise<Map<string, string>> {
  const texts = new Map<string, string>();
  const unique = [...new Set(oids)];
  if (unique.length === 0) return texts;
  const out = await runGit(['cat-file', '--batch'], cwd, `${unique.join('\n')}\n`);
  let at = 0;
  while (at < out.length) {
    const eol = out.indexOf(0x0a, at);
    const [oid = '', type, size] = out.subarray(at, eol).toString('utf8').split(' ');
    if (type !== 'blob' || size === undefined) throw new Error(`git cat-file: cannot read ${oid}`);
    const start = eol + 1;
    const end = start + Number(size);
    texts.set(oid, out.subarray(start, end).toString('utf8'));
    at = end + 1; // the newline after each object
  }
  return texts;
}

/** A tree's judged files (path → text), and the judged entries refused without being read. */
export interface TreeFiles {
  files: Map<string, string>;
  refused: Problem[];
}

/**
 * The judged files of a git tree (`treeish`: a commit, a ref) → text, with the judged entries refused
 * unread (entryProblem). Run in a subdirectory of a work tree (`cwd`), git lists the part of the tree
 * under it, with paths relative to it.
 */
export async function readGitTree(treeish: string, cwd?: string): Promise<TreeFiles> {
  // -l: each blob's size, so that an oversized one is refused without reading it
  const listing = (await runGit(['ls-tree', '-r', '-l', '-z', treeish], cwd)).toString('utf8');
  const oids = new Map<string, string>();
  const refused: Problem[] = [];
  for (const entry of listing.split('\0')) {
    const tab = entry.indexOf('\t');
    if (tab < 0) continue;
    const [mode = '', type, oid, size] = entry.slice(0, tab).split(/ +/);
    const path = entry.slice(tab + 1);
    if (!isJudgedPath(path)) continue;
    const problem = entryProblem(mode, Number(size), path);
    if (problem !== undefined) refused.push({ file: path, ...fieldError('/', problem.key, problem.params) });
    else if (type === 'blob' && oid) oids.set(path, oid);
  }
  const texts = await readBlobs([...oids.values()], cwd);
  return { files: new Map([...oids].map(([path, oid]) => [path, texts.get(oid) ?? ''])), refused };
}

/** A tree with a change laid over it: what validateChange judges. */
export interface TreeChange {
  base: Map<string, string>;
  next: Map<string, string>;
  changed: Set<string>;
  /** Changed entries refused unread (readGitTree), for validateChange. */
  refused: Problem[];
}

/** The change from commit `from` to commit `to` (a push; `from` undefined for a new branch). */
export async function commitChange(from: string | undefined, to: string, cwd?: string): Promise<TreeChange> {
  const { files: next, refused } = await readGitTree(to, cwd);
  if (from === undefined) {
    const changed = new Set([...next.keys(), ...refused.map((p) => p.file)]);
    return { base: new Map(), next, changed, refused };
  }
  const base = (await readGitTree(from, cwd)).files;
  const diff = (await runGit(['diff-tree', '-r', '-z', '--no-renames', '--name-only', from, to], cwd))
    .toString('utf8')
    .split('\0')
    .filter((p) => p !== '' && isJudgedPath(p));
  return { base, next, changed: new Set(diff), refused };
}

/**
 * The work tree of the checkout at `dir` laid over the tree of `baseRef`: the changes since their merge
 * base (committed or not, and untracked files git does not ignore), as merging them into `baseRef` would
 * leave the repository. Paths are relative to `dir`.
 */
export async function workTreeChange(
  dir: string,
  baseRef: string,
): Promise<TreeChange & { mergeBase: string }> {
  const base = (await readGitTree(`${baseRef}^{commit}`, dir)).files;
  const mergeBase = (await runGit(['merge-base', baseRef, 'HEAD'], dir)).toString('utf8').trim();
  const status = (await runGit(['diff', '--name-status', '-z', '--no-renames', '--relative', mergeBase], dir))
    .toString('utf8')
    .split('\0');
  const changed = new Set<string>();
  const deleted = new Set<string>();
  for (let i = 0; i + 1 < status.length; i += 2) {
    const path = status[i + 1] as string;
    if (!isJudgedPath(path)) continue;
    changed.add(path);
    if (status[i] === 'D') deleted.add(path);
  }
  const untracked = (await runGit(['ls-files', '-z', '--others', '--exclude-standard'], dir))
    .toString('utf8')
    .split('\0');
  for (const path of untracked) if (path !== '' && isJudgedPath(path)) changed.add(path);
  const next = new Map(base);
  const refused: Problem[] = [];
  for (const path of changed) {
    next.delete(path);
    if (deleted.has(path)) continue;
    const read = await readWorkFile(dir, path);
    if ('text' in read) next.set(path, read.text);
    else refused.push(read.problem);
  }
  return { base, next, changed, refused, mergeBase };
}
