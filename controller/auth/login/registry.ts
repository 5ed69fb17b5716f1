/**
 * Where login identities come from: who may act for an ASN, and with which keys.
 *
 * - `DirectoryRegistry`: a local checkout of a DN42-format registry, read on every lookup.
 * - `GitRegistry`: a git URL mirrored into a bare cache and fetched on an interval, over HTTP with
 *   isomorphic-git, over ssh and file:// with the git command (git-command.ts). Lookups read blobs with
 *   isomorphic-git at the last good commit, so a failed or half-done fetch never changes what logins
 *   see; the pointer moves only after a fetch succeeded and the commit has `data/`.
 * - `UsersFileRegistry`: for networks without a DN42 registry, one `AS<n>: <auth line>` per line.
 *
 * In the registry: `data/aut-num/AS<n>` → every `mnt-by` → `data/mntner/<NAME>` → `auth:` lines;
 * `PGPKEY-<8 hex>` → `data/key-cert/PGPKEY-<8 hex>`, whose `certif:` lines are the armored key
 * (key-cert.ts). Only keys that can verify a signature are methods; every other line is `skipped`.
 * Sessions read `data/route/…`, `data/route6/…` and the filter through `files()`: a peer's addresses
 * must be its own ASN's (controller/registry/routes.ts, docs/login.md).
 *
 * Over 500 lines: three registry sources behind one interface, sharing the RPSL parsing kept here;
 * each source is a class of its own.
 */
import * as fs from 'node:fs';
import { gitFs } from '../../git-fs.ts';
import { readdir, readFile, stat } from 'node:fs/promises';
import * as path from 'node:path';
import git from 'isomorphic-git';
import http from 'isomorphic-git/http/node';
import { Gauge, register } from 'prom-client';
import type { ProblemError } from '../../../common/errors.ts';
import type { RegistryFiles } from '../../registry/routes.ts';
import { type AuthMethod, parseAuthLine } from './auth-methods.ts';
import { gitFetch, gitVersion } from './git-command.ts';
import { readKeyCert } from './key-cert.ts';
import { isScpLike, registryLocation } from './registry-location.ts';
import { nameValue, parseRpsl, values } from './rpsl.ts';
import { problem } from '../../../common/messages.ts';

export interface AsnAuth {
  asn: number;
  /** The maintainers of the aut-num (every `mnt-by`), in registry order. */
  maintainers: string[];
  /** Every checkable method of every maintainer. */
  methods: AuthMethod[];
  /** Lines that were skipped and why (unsupported methods, weak keys, missing objects): for logs and the user. */
  skipped: SkippedLine[];
}

/** An `auth:` (or `mnt-by:`) line that gives no key a login can verify with, and why. */
export interface SkippedLine {
  mntner: string;
  /** The line, its key shortened: `auth: ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQ…`. */
  line: string;
  reason: string;
}

export interface Registry {
  /** The ASN's maintainers and methods; undefined when the registry has no such ASN. Throws REGISTRY_UNAVAILABLE. */
  lookup(asn: number): Promise<AsnAuth | undefined>;
  /**
   * The registry's files at its current version, for route objects and the prefix filter
   * (controller/registry/routes.ts). Absent on a source without them (a users file): there no session
   * address is checked against a registry. Throws REGISTRY_UNAVAILABLE.
   */
  files?(): Promise<RegistryFiles>;
  /** Stop background work (refresh timers). */
  close(): Promise<void>;
}

/** The part of a pino logger the registry uses. */
export interface RegistryLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

const silent: RegistryLog = { info: () => {}, warn: () => {} };

const MNTNER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$/;

function unavailable(detail: string): ProblemError {
  return problem('login.registryUnreadable', { reason: detail });
}

/** Reads one registry file by its path under the registry root; undefined when it does not exist. */
type ReadObject = (file: string) => Promise<string | undefined>;

/** `auth: <value>` as the user knows it, a key shortened to its start. */
function shownLine(attribute: string, value: string): string {
  const line = `${attribute}: ${value.trim()}`;
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}

/**
 * Resolves aut-num → every mnt-by → mntner auth lines → key-cert, through any object reader. A method is
 * listed only if it can verify a signature at `now`, or once renewed (an expired key-cert); every other
 * line is in `skipped` with its reason.
 */
export async function resolveAsn(
  read: ReadObject,
  asn: number,
  now: Date = new Date(),
): Promise<AsnAuth | undefined> {
  const autNum = await read(`data/aut-num/AS${asn}`);
  if (autNum === undefined) return undefined;
  const maintainers = [...new Set(values(parseRpsl(autNum), 'mnt-by').map(nameValue))];
  const methods: AuthMethod[] = [];
  const skipped: SkippedLine[] = [];
  for (const mntner of maintainers) {
    const skip = (line: string, reason: string) => skipped.push({ mntner, line, reason });
    if (!MNTNER_NAME.test(mntner)) {
      skip(shownLine('mnt-by', mntner), 'not a valid maintainer name');
      continue;
    }
    const text = (await read(`data/mntner/${mntner}`)) ?? (await read(`data/mntner/${mntner.toUpperCase()}`));
    if (text === undefined) {
      skip(shownLine('mnt-by', mntner), `mntner ${mntner} is not in the registry`);
      continue;
    }
    for (const line of values(parseRpsl(text), 'auth')) {
      const parsed = parseAuthLine(line, mntner);
      if (!parsed.ok) {
        skip(shownLine('auth', line), parsed.reason);
      } else if ('method' in parsed) {
        methods.push(parsed.method);
      } else {
        const cert = await read(`data/key-cert/${parsed.keyCert}`);
        const key =
          cert === undefined
            ? { ok: false as const, reason: 'it is not in the registry' }
            : await readKeyCert(parsed.keyCert, cert, now);
        if (!key.ok) {
          skip(shownLine('auth', line), `key-cert ${parsed.keyCert}: ${key.reason}`);
          continue;
        }
        methods.push({
          type: 'pgp-key-cert',
          mntner,
          keyCert: parsed.keyCert,
          armoredKey: key.armoredKey,
          fingerprint: key.fingerprint,
          ...(key.expired ? { expired: key.expired } : {}),
        });
      }
    }
  }
  return { asn, maintainers, methods, skipped };
}

// ---- a local checkout ----

export class DirectoryRegistry implements Registry {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  async lookup(asn: number): Promise<AsnAuth | undefined> {
    await this.checkData();
    return resolveAsn(this.read, asn);
  }

  async files(): Promise<RegistryFiles> {
    await this.checkData();
    return {
      list: async (dir) => {
        try {
          return await readdir(path.join(this.dir, dir));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
          throw unavailable(`registry directory ${dir} cannot be read: ${(err as Error).message}`);
        }
      },
      read: this.read,
    };
  }

  private async checkData(): Promise<void> {
    try {
      if (!(await stat(path.join(this.dir, 'data'))).isDirectory())
        throw new Error('data is not a directory');
    } catch (err) {
      throw unavailable(`registry checkout ${this.dir} has no data/ directory (${(err as Error).message})`);
    }
  }

  private readonly read: ReadObject = async (file) => {
    try {
      return await readFile(path.join(this.dir, file), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw unavailable(`registry file ${file} cannot be read: ${(err as Error).message}`);
    }
  };

  async close(): Promise<void> {}
}

// ---- a git mirror ----

const REFRESH_METRIC = 'peerops_registry_last_refresh_timestamp_seconds';

function refreshGauge(): Gauge {
  const existing = register.getSingleMetric(REFRESH_METRIC);
  if (existing) return existing as Gauge;
  return new Gauge({
    name: REFRESH_METRIC,
    help: 'Unix time of the last successful refresh of the login registry',
  });
}

/** `https://user:secret@host/x` → `https://host/x`: URLs may carry credentials, logs must not. */
function withoutCredentials(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    // git's user@host:path form has no place for a password
    return isScpLike(url) ? url : '(invalid URL)';
  }
}

/**
 * The branch in the mirror that holds the last good commit (across restarts, too). HEAD points at it, so
 * isomorphic-git tells the server it has that commit and each fetch brings only the new objects.
 */
const GOOD_BRANCH = 'refs/heads/peerops-registry';

export interface GitRegistryOptions {
  url: string;
  /** Directory of the bare mirror (created if missing). */
  cacheDir: string;
  /** Branch to follow; default: the remote's default branch. */
  ref?: string;
  /** Milliseconds between fetches; default 5 minutes. 0 disables the timer (refresh() by hand). */
  refreshIntervalMs?: number;
  /** Shallow history depth; default 1 (the DN42 registry's history is large and not needed). */
  depth?: number;
  /** A fetch that takes longer counts as failed (default 2 minutes), so a hung server cannot stall refreshes. */
  fetchTimeoutMs?: number;
  log?: RegistryLog;
}

export class GitRegistry implements Registry {
  readonly url: string;
  readonly gitdir: string;
  private readonly ref: string | undefined;
  private readonly depth: number;
  private readonly log: RegistryLog;
  private readonly intervalMs: number;
  private readonly fetchTimeoutMs: number;
  /** The URL without credentials, for logs and error details. */
  private readonly shownUrl: string;
  /** isomorphic-git for http(s); the git command for ssh and file:// (git-command.ts). */
  private readonly transport: 'http' | 'git';
  private readonly cache: object = {};
  private commit: string | undefined;
  private lastError: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<boolean> | undefined;

  constructor(opts: GitRegistryOptions) {
    this.url = opts.url;
    this.gitdir = opts.cacheDir;
    this.ref = opts.ref;
    this.depth = opts.depth ?? 1;
    this.log = opts.log ?? silent;
    this.intervalMs = opts.refreshIntervalMs ?? 5 * 60_000;
    this.fetchTimeoutMs = opts.fetchTimeoutMs ?? 2 * 60_000;
    this.shownUrl = withoutCredentials(opts.url);
    this.transport = registryLocation(opts.url).kind === 'http' ? 'http' : 'git';
  }

  /** Why the last fetch failed (credentials removed); undefined after a good one. */
  get lastFailure(): string | undefined {
    return this.lastError;
  }

  /** The commit lookups read, or undefined before the first good fetch. */
  get currentCommit(): string | undefined {
    return this.commit;
  }

  /**
   * Load the last good commit of an earlier run, fetch once, then keep fetching on the interval. A cache
   * in a read-only data dir (docs/store.md, "A read-only data directory") is read as it is, never fetched
   * into, until a restart on a writable one.
   */
  async start(): Promise<void> {
    let readOnly: string | undefined;
    try {
      await this.prepareCache();
    } catch (err) {
      readOnly = (err as NodeJS.ErrnoException).code;
      if (readOnly !== 'EROFS' && readOnly !== 'EACCES' && readOnly !== 'EPERM') throw err;
    }
    try {
      this.commit = await git.resolveRef({ fs: gitFs, gitdir: this.gitdir, ref: GOOD_BRANCH });
    } catch {
      this.commit = undefined;
    }
    if (readOnly) {
      this.lastError = `its copy in ${this.gitdir} is read-only (${readOnly})`;
      this.log.warn(
        { url: this.shownUrl, code: readOnly, commit: this.commit ?? null },
        'login registry: the data dir is read-only; logins read the copy fetched last, not refreshed until a restart',
      );
      return;
    }
    await this.refresh();
    if (this.intervalMs > 0) {
      this.timer = setInterval(() => void this.refresh(), this.intervalMs);
      this.timer.unref();
    }
  }

  /** The cache repository, its HEAD and its remote, as this run names them. */
  private async prepareCache(): Promise<void> {
    await fs.promises.mkdir(this.gitdir, { recursive: true });
    if (!fs.existsSync(path.join(this.gitdir, 'HEAD'))) {
      await git.init({ fs: gitFs, gitdir: this.gitdir, bare: true });
    }
    await git.writeRef({
      fs: gitFs,
      gitdir: this.gitdir,
      ref: 'HEAD',
      value: GOOD_BRANCH,
      symbolic: true,
      force: true,
    });
    // Recorded without credentials (they are passed to each fetch instead); force: this run's URL wins.
    await git.addRemote({
      fs: gitFs,
      gitdir: this.gitdir,
      remote: 'origin',
      url: this.shownUrl,
      force: true,
    });
  }

  /** Fetch and move to the new commit; on any failure keep the last good one. Resolves to success. */
  refresh(): Promise<boolean> {
    this.running ??= this.fetchOnce().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async fetchOnce(): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`fetch took longer than ${this.fetchTimeoutMs} ms`)),
        this.fetchTimeoutMs,
      );
    });
    try {
      // Shallow only for the first fetch; later fetches name the good commit and get only what is new.
      const depth = this.commit ? undefined : this.depth;
      const fetching =
        this.transport === 'git'
          ? gitFetch({
              gitdir: this.gitdir,
              url: this.url,
              ref: this.ref,
              depth,
              timeoutMs: this.fetchTimeoutMs,
            })
          : git
              .fetch({
                fs: gitFs,
                http,
                gitdir: this.gitdir,
                remote: 'origin',
                url: this.url,
                ...(this.ref ? { remoteRef: this.ref } : {}),
                singleBranch: true,
                ...(depth !== undefined ? { depth } : {}),
                tags: false,
                cache: this.cache,
              })
              .then((result) => result.fetchHead);
      const commit = await Promise.race([fetching, timeout]);
      if (!commit) throw new Error('the remote sent no commit');
      const root = await git.readTree({ fs: gitFs, gitdir: this.gitdir, oid: commit, cache: this.cache });
      if (!root.tree.some((e) => e.path === 'data' && e.type === 'tree')) {
        throw new Error(`commit ${commit} has no data/ directory`);
      }
      await git.writeRef({ fs: gitFs, gitdir: this.gitdir, ref: GOOD_BRANCH, value: commit, force: true });
      if (commit !== this.commit) this.log.info({ url: this.shownUrl, commit }, 'login registry updated');
      this.commit = commit;
      this.lastError = undefined;
      refreshGauge().set(Date.now() / 1000);
      return true;
    } catch (err) {
      this.lastError = (err as Error).message.replaceAll(this.url, this.shownUrl);
      this.log.warn(
        { url: this.shownUrl, err: this.lastError, keeping: this.commit ?? null },
        'login registry refresh failed; keeping the last good copy',
      );
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  async lookup(asn: number): Promise<AsnAuth | undefined> {
    return resolveAsn(this.reader(this.goodCommit()), asn);
  }

  /** The files at the last good commit, all read from that one commit. */
  async files(): Promise<RegistryFiles> {
    const commit = this.goodCommit();
    const list = async (filepath: string): Promise<string[]> => {
      try {
        const { tree } = await git.readTree({
          fs: gitFs,
          gitdir: this.gitdir,
          oid: commit,
          filepath,
          cache: this.cache,
        });
        return tree.filter((e) => e.type === 'blob').map((e) => e.path);
      } catch (err) {
        if (err instanceof git.Errors.NotFoundError) return [];
        throw unavailable(`registry directory ${filepath} cannot be read: ${(err as Error).message}`);
      }
    };
    return { list, read: this.reader(commit) };
  }

  /** The commit lookups read: the last good one (a refresh moving it later does not change a lookup). */
  private goodCommit(): string {
    if (!this.commit) {
      throw unavailable(
        `registry ${this.shownUrl} has not been fetched yet${this.lastError ? `: ${this.lastError}` : ''}`,
      );
    }
    return this.commit;
  }

  private reader(commit: string): ReadObject {
    return async (filepath) => {
      try {
        const { blob } = await git.readBlob({
          fs: gitFs,
          gitdir: this.gitdir,
          oid: commit,
          filepath,
          cache: this.cache,
        });
        return Buffer.from(blob).toString('utf8');
      } catch (err) {
        if (err instanceof git.Errors.NotFoundError) return undefined;
        throw unavailable(`registry object ${filepath} cannot be read: ${(err as Error).message}`);
      }
    };
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}

// ---- a users file ----

/**
 * `AS<n>: <auth line>` per line (`#` starts a comment line; blank lines are ignored), e.g.
 * `AS4242420001: ssh-ed25519 AAAAC3Nza… alice@laptop` or `AS64512: pgp-fingerprint 0123…`.
 * Several lines for one ASN add keys. `PGPKEY-…` is refused: there is no key-cert to resolve it.
 */
export function parseUsersFile(text: string, file = 'users file'): Map<number, AuthMethod[]> {
  const out = new Map<number, AuthMethod[]>();
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const where = `${file} line ${i + 1}`;
    const m = /^(?:AS)?(\d{1,10})\s*:\s*(.+)$/i.exec(line);
    const asn = m ? Number(m[1]) : NaN;
    if (!m || !Number.isInteger(asn) || asn < 1 || asn > 4294967295) {
      throw new Error(`${where}: expected 'AS<number>: <auth line>'`);
    }
    const parsed = parseAuthLine(m[2]!, `AS${asn}`);
    if (!parsed.ok) throw new Error(`${where}: ${parsed.reason}`);
    if (!('method' in parsed)) {
      throw new Error(
        `${where}: ${parsed.keyCert} needs a registry key-cert; use 'pgp-fingerprint <hex>' instead`,
      );
    }
    const list = out.get(asn) ?? [];
    list.push(parsed.method);
    out.set(asn, list);
  });
  return out;
}

export class UsersFileRegistry implements Registry {
  readonly file: string;
  private readonly log: RegistryLog;
  private users: Map<number, AuthMethod[]> | undefined;
  private mtimeMs = -1;

  constructor(file: string, log: RegistryLog = silent) {
    this.file = file;
    this.log = log;
  }

  /** Parse now, so that a bad file stops the controller at start with the line that is wrong. */
  async start(): Promise<void> {
    const st = await stat(this.file);
    this.users = parseUsersFile(await readFile(this.file, 'utf8'), this.file);
    this.mtimeMs = st.mtimeMs;
  }

  async lookup(asn: number): Promise<AsnAuth | undefined> {
    await this.reloadIfChanged();
    const methods = this.users?.get(asn);
    return methods ? { asn, maintainers: [`AS${asn}`], methods, skipped: [] } : undefined;
  }

  /** Edits are picked up on the next lookup; an edit that does not parse keeps the last good copy. */
  private async reloadIfChanged(): Promise<void> {
    let st: fs.Stats;
    try {
      st = await stat(this.file);
    } catch (err) {
      if (this.users) return;
      throw unavailable(`users file ${this.file} cannot be read: ${(err as Error).message}`);
    }
    if (st.mtimeMs === this.mtimeMs && this.users) return;
    try {
      this.users = parseUsersFile(await readFile(this.file, 'utf8'), this.file);
      this.mtimeMs = st.mtimeMs;
    } catch (err) {
      if (!this.users) throw unavailable((err as Error).message);
      this.log.warn({ err: (err as Error).message }, 'users file does not parse; keeping the last good copy');
    }
  }

  async close(): Promise<void> {}
}

// ---- choosing one from the configuration ----

export interface RegistrySource {
  /** A git URL (http(s), ssh, file), a registry checkout directory, or a users file (registry-location.ts). */
  source: string;
  /** For a git URL: where the mirror lives (e.g. `<data dir>/registry.git`). */
  cacheDir?: string;
  ref?: string;
  refreshIntervalMs?: number;
  log?: RegistryLog;
}

/**
 * Build and start the registry a source names. Throws on a form it does not read, a bad users file, a
 * git URL without the git command to fetch it, and a file:// repository it cannot fetch; not on a failed
 * first fetch over the network, which may come back (the refresh retries).
 */
export async function openRegistry(cfg: RegistrySource): Promise<Registry> {
  const location = registryLocation(cfg.source);
  if (location.kind !== 'path') {
    if (!cfg.cacheDir) throw new Error('a git registry source needs a cache directory');
    const shown = withoutCredentials(location.url);
    if (location.kind === 'git') {
      await gitVersion().catch((err: Error) => {
        throw new Error(`PEEROPS_REGISTRY ${shown}: fetching it needs ${err.message}`);
      });
    }
    const reg = new GitRegistry({
      url: cfg.source,
      cacheDir: cfg.cacheDir,
      ...(cfg.ref ? { ref: cfg.ref } : {}),
      ...(cfg.refreshIntervalMs !== undefined ? { refreshIntervalMs: cfg.refreshIntervalMs } : {}),
      ...(cfg.log ? { log: cfg.log } : {}),
    });
    await reg.start();
    if (location.kind === 'git' && location.transport === 'file' && reg.currentCommit === undefined) {
      await reg.close();
      throw new Error(`PEEROPS_REGISTRY ${shown}: ${reg.lastFailure ?? 'nothing was fetched'}`);
    }
    return reg;
  }
  const st = await stat(cfg.source);
  if (st.isDirectory()) return new DirectoryRegistry(cfg.source);
  const reg = new UsersFileRegistry(cfg.source, cfg.log);
  await reg.start();
  return reg;
}
