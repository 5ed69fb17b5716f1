/**
 * Applies a whole desired BIRD tree (main bird.conf + managed include dirs: peers, ibgp.d, …):
 *   1. compare with the files on disk; nothing differs → no write, no configure;
 *   2. write the whole tree to a staging dir and check it with `bird -p -c <staged main>`;
 *   3. swap the changed files in (temp + fsync + rename each; the replaced ones are kept in
 *      `<root>/.peerops-previous/`), then one `configure` over the control socket;
 *   4. BIRD refuses → the previous files come back and BIRD is configured back; the result names
 *      BIRD's message and the files it blamed (file:line), so only those sessions are marked failed.
 * A marker file is written before the swap and removed once BIRD has been configured on the result: an
 * agent that dies in between finds it on the next pass and configures even though the files match, so
 * BIRD never keeps running the old config behind new files.
 */
import { randomBytes } from 'node:crypto';
import { cp, mkdir, readdir, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { run } from '../system/exec.ts';
import { BirdError, type BirdControl } from './control.ts';
import { ensureIncludeDir, ensureIncludeDirs } from './dirs.ts';
import { atomicWriteFile, atomicWriteFileNoDirSync, fsyncDir } from '../../common/atomic-write.ts';
import { mapLimit } from '../../common/concurrency.ts';
import { readTextIfExists, readTextsIfExist } from '../../common/read-file.ts';

/** Directory beside the managed ones that main-config.ts includes for the operator's own files. */
const LOCAL_DIR = 'local.d';
/** BIRD files written at once by a pass that changes many (a first pass: one per session). */
const FILES_IN_PARALLEL = 16;
/** In the BIRD root while files have been swapped in that BIRD has not been configured on yet. */
export const CONFIGURE_PENDING = '.peerops-configure-pending';
/** Prefix of the staging dir a check writes the whole tree to (in the BIRD root, removed after). */
export const STAGING_PREFIX = '.peerops-staging-';

export interface ManagedDir {
  /** Key the main renderer receives the dir under (`peerConfDir`, `ibgpConfDir`, `meshConfDir`). */
  key: string;
  dir: string;
  /** File name → content; `*.conf` files in dir that are not listed are removed, when `owns` says they are the agent's. */
  files: Map<string, string>;
  /** Which unlisted files are the agent's to remove (default: every `*.conf`). */
  owns?: (name: string) => boolean;
  /**
   * What the caller read of these files on disk this pass (name → content, undefined: no file), so the
   * diff reads only the others. True until the applier writes, which it does once a pass (or after a
   * check that refused the tree and wrote nothing).
   */
  onDisk?: ReadonlyMap<string, string | undefined>;
}

export interface DesiredTree {
  /** The main config for the given dirs (the same renderer for the staged and the live tree). */
  main: (dirs: Record<string, string>) => string;
  dirs: ManagedDir[];
  /**
   * Hand-made files moved aside in the swap, before the writes, and moved back if BIRD refuses: an
   * adopted session's protocol is then defined once, by the agent's file, in the configure that takes it
   * over (docs/agent.md, Adopting a running router).
   */
  setAside?: readonly { from: string; to: string }[];
}

export interface ApplyFailure {
  message: string;
  /** Live paths of the files BIRD named (file:line); empty when it named none. */
  blamed: string[];
  /** Live paths of every file this pass would have changed. */
  changed: string[];
  stage: 'check' | 'configure';
  /** BIRD was not there to ask (control socket or `bird` missing): nothing was refused. */
  unreachable?: boolean;
}

export interface ApplyResult {
  /** Files written or removed (0 when the tree matched). */
  writes: number;
  configured: boolean;
  changed: string[];
  failure?: ApplyFailure;
}

interface FileChange {
  path: string;
  content: string | undefined; // undefined: remove
}

export class BirdApplier {
  readonly mainPath: string;
  readonly root: string;
  private readonly pendingPath: string;
  private readonly control: BirdControl;
  /** Count of `configure` calls made, for tests and the benchmark. */
  configureCalls = 0;
  /**
   * BIRD may not run the files on disk although no marker says so: the agent removed a killed pass's
   * marker at start (system/leftovers.ts). The next apply configures, as for the marker.
   */
  configureOwed = false;

  constructor(control: BirdControl, mainPath: string) {
    this.control = control;
    this.mainPath = resolve(mainPath);
    this.root = resolve(mainPath, '..');
    this.pendingPath = join(this.root, CONFIGURE_PENDING);
  }

  /** The changes that would make the disk match `tree`. Reads every managed file. */
  async diff(tree: DesiredTree): Promise<FileChange[]> {
    const changes: FileChange[] = [];
    const liveDirs = Object.fromEntries(tree.dirs.map((d) => [d.key, d.dir]));
    const main = tree.main(liveDirs);
    if ((await readTextIfExists(this.mainPath)) !== main)
      changes.push({ path: this.mainPath, content: main });
    for (const d of tree.dirs) {
      const present = (await listConf(d.dir)).filter((f) => !d.files.has(f) && (d.owns?.(f) ?? true));
      for (const f of present) changes.push({ path: join(d.dir, f), content: undefined });
      for (const name of d.files.keys()) checkFileName(name);
      const unread = [...d.files.keys()].filter((name) => !d.onDisk?.has(name));
      const read = readTextsIfExist(d.dir, unread);
      for (const [name, content] of d.files) {
        const onDisk = read.has(name) ? read.get(name) : d.onDisk?.get(name);
        if (onDisk !== content) changes.push({ path: join(d.dir, name), content });
      }
    }
    return changes;
  }

  /**
   * Makes the disk and BIRD match `tree`. `forceConfigure` configures even when the files match (BIRD
   * runs something else, e.g. the agent died between the swap and the configure).
   */
  async apply(tree: DesiredTree, opts: { forceConfigure?: boolean } = {}): Promise<ApplyResult> {
    // The check stages its own copies of these dirs; the live tree needs them too, even empty, or BIRD
    // refuses the main config's `include "<dir>/*.conf"` (a fresh /etc/bird has none of them).
    await ensureIncludeDirs([...tree.dirs.map((d) => d.dir), join(this.root, LOCAL_DIR)], this.root);
    const changes = await this.diff(tree);
    const changed = changes.map((c) => c.path);
    const setAside = tree.setAside ?? [];
    changed.push(...setAside.map((m) => m.from));
    if (changes.length === 0 && setAside.length === 0) {
      const pending = this.configureOwed || (await readTextIfExists(this.pendingPath)) !== undefined;
      if (!opts.forceConfigure && !pending) return { writes: 0, configured: false, changed };
      try {
        await this.configure();
        await rm(this.pendingPath, { force: true });
        return { writes: 0, configured: true, changed };
      } catch (err) {
        return { writes: 0, configured: false, changed, failure: failureOf(err, [], 'configure') };
      }
    }
    const check = await this.check(tree);
    if (check) return { writes: 0, configured: false, changed, failure: { ...check, changed } };

    const backup = join(this.root, '.peerops-previous');
    await rm(backup, { recursive: true, force: true });
    await mkdir(backup, { recursive: true });
    const restore: { path: string; saved: string | undefined }[] = [];
    for (const c of changes) {
      const old = await readTextIfExists(c.path);
      let saved: string | undefined;
      if (old !== undefined) {
        saved = join(backup, `${restore.length}-${basename(c.path)}`);
        await writeFile(saved, old);
      }
      restore.push({ path: c.path, saved });
    }
    await atomicWriteFile(this.pendingPath, `${new Date().toISOString()}\n`);
    for (const m of setAside) await rename(m.from, m.to);
    // Written 16 at a time, each directory fsynced once when all are in place: one after another, with
    // two fsyncs each, a first pass at 1,000 sessions spent seconds here (docs/benchmarks.md, the agent).
    const dirs = new Set<string>();
    await mapLimit(changes, FILES_IN_PARALLEL, async (c) => {
      if (c.content !== undefined) dirs.add(await atomicWriteFileNoDirSync(c.path, c.content));
      else {
        await unlink(c.path).catch(() => undefined);
        dirs.add(dirname(c.path));
      }
    });
    await Promise.all([...dirs].map(fsyncDir));
    try {
      await this.configure();
      await rm(this.pendingPath, { force: true });
      return { writes: changes.length + setAside.length, configured: true, changed };
    } catch (err) {
      const failure = failureOf(err, changed, 'configure');
      for (const r of restore) {
        if (r.saved === undefined) await unlink(r.path).catch(() => undefined);
        else await atomicWriteFile(r.path, await readFile(r.saved, 'utf8'));
      }
      for (const m of setAside) await rename(m.to, m.from);
      // BIRD keeps running its old config after a refused configure; configuring back makes sure. While
      // that fails too (BIRD down), the marker stays and the next pass configures.
      await this.configure()
        .then(() => rm(this.pendingPath, { force: true }))
        .catch(() => undefined);
      return { writes: changes.length * 2, configured: false, changed, failure };
    }
  }

  private async configure(): Promise<void> {
    this.configureCalls++;
    await this.control.configure();
    this.configureOwed = false;
  }

  /** Writes the whole tree to a staging dir and runs `bird -p`; undefined when BIRD accepts it. */
  async check(tree: DesiredTree): Promise<Omit<ApplyFailure, 'changed'> | undefined> {
    const stage = join(this.root, `${STAGING_PREFIX}${randomBytes(4).toString('hex')}`);
    const stagedDirs: Record<string, string> = {};
    const liveOf = new Map<string, string>();
    try {
      for (const d of tree.dirs) {
        const dir = join(stage, d.key);
        stagedDirs[d.key] = dir;
        await mkdir(dir, { recursive: true });
        for (const name of d.files.keys()) liveOf.set(join(dir, name), join(d.dir, name));
        await mapLimit([...d.files], FILES_IN_PARALLEL, ([name, content]) =>
          writeFile(join(dir, name), content),
        );
      }
      // The operator's own additions (main-config.ts: `<root>/local.d`, beside peerConfDir) are checked too.
      const local = join(this.root, LOCAL_DIR);
      await ensureIncludeDir(local, this.root);
      await cp(local, join(stage, LOCAL_DIR), { recursive: true });
      const stagedMain = join(stage, basename(this.mainPath));
      liveOf.set(stagedMain, this.mainPath);
      await writeFile(stagedMain, tree.main(stagedDirs));
      const r = await birdParse(stagedMain);
      if (!r)
        return {
          message: 'bird not found on PATH: install bird2',
          blamed: [],
          stage: 'check',
          unreachable: true,
        };
      if (r.code === 0) return undefined;
      let message = (r.stderr || r.stdout).trim().replace(/^bird: /, '');
      const blamed: string[] = [];
      const m = /^(\/[^:\s]+):(\d+):(\d+)/.exec(message);
      if (m?.[1]) {
        // the staged copy of an operator's file is named by its live path
        const live = liveOf.get(m[1]) ?? m[1].replace(`${stage}/${LOCAL_DIR}/`, `${local}/`);
        blamed.push(live);
        message = message.replace(m[1], live);
      }
      if (!m?.[1] || m[1] === stagedMain) {
        // BIRD names the main config for what an included file left open (`unexpected END` at its
        // end): find the operator's file without which the tree parses.
        const culprit = await localCulprit(join(stage, LOCAL_DIR), stagedMain);
        if (culprit) {
          const live = join(local, culprit);
          return {
            message: `${live}: BIRD accepts the configuration without this file: ${message}`,
            blamed: [live],
            stage: 'check',
          };
        }
      }
      return { message, blamed, stage: 'check' };
    } finally {
      await rm(stage, { recursive: true, force: true });
    }
  }
}

/** `bird -p -c <main>`; undefined when there is no `bird` on PATH. */
async function birdParse(
  main: string,
): Promise<{ code: number; stdout: string; stderr: string } | undefined> {
  return run('bird', ['-p', '-c', main]).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
}

/**
 * The one file of the staged local.d that makes the tree fail: each is set aside in turn and the tree
 * parsed again (a few `bird -p`, only after a refusal that names no file of its own).
 */
async function localCulprit(stagedLocal: string, stagedMain: string): Promise<string | undefined> {
  for (const f of await listConf(stagedLocal)) {
    const path = join(stagedLocal, f);
    const aside = `${path}.aside`;
    await rename(path, aside);
    const r = await birdParse(stagedMain);
    await rename(aside, path);
    if (r?.code === 0) return f;
  }
  return undefined;
}

function failureOf(err: unknown, changed: string[], stage: 'check' | 'configure'): ApplyFailure {
  const message = err instanceof BirdError ? err.message : String((err as Error).message ?? err);
  const blamed: string[] = [];
  const m = /^(\/[^:\s]+):(\d+):(\d+)/.exec(message);
  if (m?.[1]) blamed.push(m[1]);
  // A BirdError without a reply is the control socket failing, not BIRD refusing.
  const unreachable = err instanceof BirdError && err.reply === undefined;
  return { message, blamed, changed, stage, ...(unreachable ? { unreachable } : {}) };
}

function checkFileName(name: string): void {
  if (!/^[A-Za-z0-9_.-]{1,128}\.conf$/.test(name)) throw new Error(`BIRD file name '${name}' is not allowed`);
}

async function listConf(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).filter((f) => f.endsWith('.conf')).sort();
  } catch {
    return [];
  }
}
