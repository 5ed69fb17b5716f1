/**
 * Checked pushes (docs/gitops.md, "Checked pushes"): the store's bare repository refuses a push whose
 * manifests the store would skip, instead of taking it and only logging. git runs `hooks/pre-receive`
 * before it moves any ref; the hook runs `peerops hook pre-receive`, which judges the pushed tree as
 * `peerops validate --base <old>` would (common/judge-tree.ts) and answers the pusher on stderr. An
 * entry under the store's folders that the store would not read as a file (a submodule, a symbolic
 * link) or that is over MANIFEST_LIMITS is refused by its mode and size, without reading it.
 */
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { problemReason, validateChange } from '../../../common/judge-tree.ts';
import { commitChange } from '../../../common/read-tree.ts';
import { usageError } from '../../../common/usage.ts';

/** Only the controller writes status (docs/store.md, "Status is kept apart"). */
const STATUS_REF = 'refs/heads/peerops-status';

/** A string as one sh word. */
function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** The hook script: this Node on this peerops entry point, so that it checks with the running release. */
export function preReceiveScript(node: string, entry: string, branch?: string): string {
  const env = branch === undefined ? '' : `PEEROPS_GIT_BRANCH=${shellQuote(branch)} `;
  return [
    '#!/bin/sh',
    '# Written by the peerops controller at each start; edits are overwritten (docs/gitops.md, "Checked pushes").',
    `${env}exec ${shellQuote(node)} ${shellQuote(entry)} hook pre-receive`,
    '',
  ].join('\n');
}

/**
 * Writes `<gitdir>/hooks/pre-receive` (mode 0755) unless it already says the same: atomically, so that a
 * push meanwhile runs the old script or the new one, never half of one. `node` and `entry` default to
 * the running process (`process.execPath`, `process.argv[1]`); `branch` is the store's spec branch when
 * it is not `main`.
 */
export async function installPreReceiveHook(
  gitdir: string,
  options: { node?: string; entry?: string; branch?: string } = {},
): Promise<void> {
  const entry = options.entry ?? process.argv[1];
  if (entry === undefined) throw new Error('cannot install the pre-receive hook: no peerops entry point');
  const script = preReceiveScript(options.node ?? process.execPath, resolve(entry), options.branch);
  const dir = join(gitdir, 'hooks');
  const path = join(dir, 'pre-receive');
  const current = await readFile(path, 'utf8').catch(() => undefined);
  if (current === script) {
    if (((await stat(path)).mode & 0o777) !== 0o755) await chmod(path, 0o755);
    return;
  }
  await mkdir(dir, { recursive: true });
  const tmp = join(dir, `.pre-receive.peerops-${process.pid}.tmp`);
  try {
    await writeFile(tmp, script, { mode: 0o755 });
    await chmod(tmp, 0o755); // writeFile's mode is reduced by the umask
    await rename(tmp, path);
  } finally {
    await rm(tmp, { force: true });
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const isZero = (id: string) => /^0+$/.test(id);

/** Judges one ref update; the lines to tell the pusher, empty when it may go in. */
export async function refUpdateProblems(
  oldId: string,
  newId: string,
  ref: string,
  specRef: string,
): Promise<string[]> {
  if (ref === STATUS_REF)
    return [
      `peerops: ${ref} is written by the controller only (docs/store.md, "Status is kept apart"); push spec changes to ${specRef}`,
    ];
  if (ref !== specRef) return [];
  if (isZero(newId)) return [`peerops: ${ref} holds the network's spec and cannot be deleted`];
  const change = await commitChange(isZero(oldId) ? undefined : oldId, newId);
  const report = validateChange(change.next, { tree: change.base, changed: change.changed }, change.refused);
  if (report.problemCount === 0) return [];
  const lines: string[] = [];
  for (const f of report.files)
    for (const p of f.problems) lines.push(`${f.file}: ${p.pointer}: ${problemReason(f, p)}`);
  lines.push(
    `peerops: ${ref} refused: ${report.problemCount} problem(s); the store would skip these manifests (check before pushing: peerops validate --base <branch>, docs/gitops.md)`,
  );
  return lines;
}

/** `peerops hook pre-receive`: run by git in the store's repository, `<old> <new> <ref>` lines on stdin. */
export async function main(argv: string[]): Promise<number> {
  if (argv.length !== 1 || argv[0] !== 'pre-receive')
    return usageError(
      "usage: peerops hook pre-receive (git runs it in the store's repository, docs/gitops.md)",
    );
  const specRef = `refs/heads/${process.env.PEEROPS_GIT_BRANCH || 'main'}`;
  let refused = false;
  try {
    for (const line of (await readStdin()).split('\n')) {
      const [oldId, newId, ref] = line.trim().split(' ');
      if (oldId === undefined || newId === undefined || ref === undefined) continue;
      const problems = await refUpdateProblems(oldId, newId, ref, specRef);
      for (const p of problems) console.error(p);
      if (problems.length > 0) refused = true;
    }
  } catch (err) {
    // refuse what could not be checked: the store would take it unchecked
    console.error(
      `peerops: the push could not be checked, so it is refused: ${err instanceof Error ? err.message : String(err)}`,
    );
    return 1;
  }
  return refused ? 1 : 0;
}
