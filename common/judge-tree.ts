/**
 * Judging a tree of manifests (docs/gitops.md), a rule that `peerops validate` and the store's
 * pre-receive hook share: a tree of files (path → text) with the rules the git store applies to merged
 * manifests (manifests.ts and rules/, called here, never restated), and a change of such a tree against
 * a base: the base branch's tree with the change laid over it, as the merge would leave it. Reading the
 * trees (a directory, git) is read-tree.ts.
 */
import type { FieldError } from './errors.ts';
import { allocateListenPort, isDn42Asn } from './naming.ts';
import { wireGuardKeyId } from './net.ts';
import type { PolicySpec, RouterSpec, SessionSpecInput } from './schema.ts';
import {
  isManifestPath,
  manifestByteLimit,
  parseManifest,
  parseYaml,
  tooLarge,
  type ParseResult,
} from './manifests.ts';
import {
  mergePolicies,
  policyWarnings,
  routerSetErrors,
  sessionAddressingErrors,
  sessionSetErrors,
  type NetworkView,
  type SessionSetFacts,
} from './rules/index.ts';
import { fieldError, type FieldSaid } from './messages.ts';

/** The repository layout, as problems name it (docs/store.md, "Repository layout"). */
export const LAYOUT = 'routers/<name>.yaml, sessions/<router>/as<asn>.yaml, policy/<name>.yaml';

export interface Problem extends FieldError {
  file: string;
}

/** Files by path (relative to the repository root, `/`-separated) → text. */
export type Tree = ReadonlyMap<string, string>;

export interface TreeCounts {
  routers: number;
  sessions: number;
  policies: number;
}

/**
 * The files validation reads: everything under routers/, sessions/ and policy/ (the store reads each as a
 * manifest), and any other *.yaml/*.yml, which is a manifest the store would never see. Paths with a
 * segment starting with a dot (.github/, .gitea/, .forgejo/, dotfiles) are tool configuration, and
 * node_modules/ is npm's.
 */
export function isJudgedPath(path: string): boolean {
  if (isManifestPath(path)) return true;
  if (path.split('/').some((s) => s.startsWith('.') || s === 'node_modules')) return false;
  return /\.ya?ml$/i.test(path);
}

type SessionPair = { key: string; asn: number; router: string };
const pairOf = (asn: number, router: string): SessionPair => ({ key: `${asn}/${router}`, asn, router });

/** A file parsed and judged on its own, by path and text: the trees a change compares share most files. */
export type ParseCache = Map<string, { result: ParseResult; pair: SessionPair | undefined }>;

/** The (ASN, router) a session file claims in its spec, read apart from validation: a file whose path
 * does not match its spec must still count as a duplicate. */
function sessionPair(text: string): SessionPair | undefined {
  try {
    const spec = (parseYaml(text) as { spec?: { asn?: unknown; router?: unknown } } | undefined)?.spec;
    if (typeof spec?.asn === 'number' && typeof spec.router === 'string')
      return pairOf(spec.asn, spec.router);
  } catch {
    // not YAML: parseManifest reports it
  }
  return undefined;
}

type Named<S> = { file: string; name: string; spec: S };

/**
 * Every problem of a whole tree: each file on its own (parseManifest: schema, path agreement), misplaced
 * YAML, then the rules across files the store applies at a merge (router set, known router, blocked ASN,
 * listen ports, uuids, addressing), plus what the store tolerates but an operator should fix (a second
 * session for one (ASN, router) under another path, the default policy). Problems sorted by file, each
 * file's in the order found.
 */
export function validateTree(
  tree: Tree,
  cache: ParseCache = new Map(),
): { problems: Problem[]; counts: TreeCounts } {
  const problems: Problem[] = [];
  const add = (file: string, errors: FieldError[]) => {
    for (const e of errors) problems.push({ file, ...e });
  };
  const routers: Named<RouterSpec>[] = [];
  const sessions: Named<SessionSpecInput>[] = [];
  const policies: Named<PolicySpec>[] = [];
  const pairs = new Map<string, string>();
  for (const file of [...tree.keys()].filter(isJudgedPath).sort()) {
    const text = tree.get(file) ?? '';
    if (!isManifestPath(file)) {
      problems.push({
        file,
        ...fieldError('/', 'field.outsideLayout', { layout: LAYOUT }),
      });
      continue;
    }
    const cacheKey = `${file}\0${text}`;
    let parsed = cache.get(cacheKey);
    if (!parsed) {
      const result = parseManifest(file, text);
      // a valid file's pair is its path's; only an invalid one must be read for the pair it claims
      const pair = !file.startsWith('sessions/')
        ? undefined
        : result.ok && result.manifest.kind === 'PeeringSession'
          ? pairOf(result.manifest.spec.asn, result.manifest.spec.router)
          : sessionPair(text);
      cache.set(cacheKey, (parsed = { result, pair }));
    }
    const { result, pair } = parsed;
    if (pair) {
      const first = pairs.get(pair.key);
      if (first) {
        problems.push({
          file,
          ...fieldError('/spec', 'field.secondSession', { asn: pair.asn, router: pair.router, first }),
        });
      } else pairs.set(pair.key, file);
    }
    if (!result.ok) {
      add(file, result.errors);
      continue;
    }
    const m = result.manifest;
    if (m.kind === 'Router') routers.push({ file, name: m.name, spec: m.spec });
    else if (m.kind === 'PeeringSession') sessions.push({ file, name: m.name, spec: m.spec });
    else policies.push({ file, name: m.name, spec: m.spec });
  }

  for (const r of routers) add(r.file, routerSetErrors(r.name, r.spec, routers));

  const defaultPolicy = policies.find((p) => p.name === 'default');
  if (!defaultPolicy) {
    problems.push({
      file: 'policy/default.yaml',
      ...fieldError('/', 'field.noDefaultPolicy'),
    });
  }
  for (const p of policies) add(p.file, policyWarnings(p.name, p.spec));

  const byPort = new Map<string, string[]>();
  const byUuid = new Map<string, string[]>();
  const push = (map: Map<string, string[]>, key: string, name: string) =>
    map.set(key, [...(map.get(key) ?? []), name]);
  for (const s of sessions) {
    if (s.spec.listenPort !== undefined) push(byPort, `${s.spec.router}:${s.spec.listenPort}`, s.name);
    if (s.spec.uuid !== undefined) push(byUuid, s.spec.uuid, s.name);
  }
  // the first file of a name, as a search of the list would find it
  const routerByName = new Map<string, RouterSpec>();
  for (const r of routers) if (!routerByName.has(r.name)) routerByName.set(r.name, r.spec);
  const neighbours = addressIndex(routers, sessions);
  for (const s of sessions) {
    const { router: routerName, listenPort, uuid } = s.spec;
    const facts: SessionSetFacts = {
      router: routerByName.get(routerName),
      policy: mergePolicies(defaultPolicy?.spec, policies.find((p) => p.name === routerName)?.spec),
      portHolders: (listenPort !== undefined && byPort.get(`${routerName}:${listenPort}`)) || [],
      uuidHolders: (uuid !== undefined && byUuid.get(uuid)) || [],
    };
    add(s.file, sessionSetErrors(s.name, s.spec, facts));
    // what the API refuses at create; the store skips such a merged session, so the pull request is the place
    if (!facts.router) continue;
    add(
      s.file,
      sessionAddressingErrors(s.name, s.spec, facts.router, facts.policy, neighbours(s.spec), '/spec'),
    );
  }
  problems.push(...portAllocationProblems(sessions, routerByName, byPort));

  // stable: problems of one file keep their order
  problems.sort((x, y) => (x.file < y.file ? -1 : x.file > y.file ? 1 : 0));
  return {
    problems,
    counts: { routers: routers.length, sessions: sessions.length, policies: policies.length },
  };
}

/**
 * A session without listenPort gets one from the store at the merge (allocateListenPort, docs/store.md);
 * when its router has none free the store skips it. Allocated in path order, after the ports files name.
 */
function portAllocationProblems(
  sessions: Named<SessionSpecInput>[],
  routerByName: ReadonlyMap<string, RouterSpec>,
  byPort: ReadonlyMap<string, string[]>,
): Problem[] {
  const problems: Problem[] = [];
  const used = new Map<string, Map<number, string>>();
  for (const [key, names] of byPort) {
    const at = key.lastIndexOf(':');
    const router = key.slice(0, at);
    const ports = used.get(router) ?? new Map<number, string>();
    ports.set(Number(key.slice(at + 1)), names[0] as string);
    used.set(router, ports);
  }
  for (const s of sessions) {
    if (s.spec.listenPort !== undefined) continue;
    const router = routerByName.get(s.spec.router);
    if (!router) continue;
    const ports = used.get(s.spec.router) ?? new Map<number, string>();
    used.set(s.spec.router, ports);
    const port = allocateListenPort(s.spec.asn, router, new Set(ports.keys()));
    if (port !== undefined) {
      ports.set(port, s.name);
      continue;
    }
    const dn42 = 20000 + (s.spec.asn % 10000);
    problems.push({
      file: s.file,
      ...(isDn42Asn(s.spec.asn)
        ? fieldError('/spec/listenPort', 'field.dn42PortTaken', {
            router: s.spec.router,
            asn: s.spec.asn,
            port: dn42,
            session: ports.get(dn42) ?? '',
          })
        : fieldError('/spec/listenPort', 'field.noFreePort', { router: s.spec.router })),
    });
  }
  return problems;
}

/**
 * For each session, the routers and the sessions its addresses and key could clash with (what
 * sessionAddressingErrors compares), found by address and by (router, key): comparing each session with
 * every other one would make a push of a large network wait (docs/gitops.md, "Checked pushes").
 */
function addressIndex(
  routers: Named<RouterSpec>[],
  sessions: Named<SessionSpecInput>[],
): (spec: SessionSpecInput) => NetworkView {
  const index = new Map<string, Named<SessionSpecInput>[]>();
  const add = (key: string, s: Named<SessionSpecInput>) => {
    const list = index.get(key);
    if (list) list.push(s);
    else index.set(key, [s]);
  };
  // keyed by the decoded key, as sessionAddressingErrors compares keys: another spelling is still found
  const keyOf = (spec: SessionSpecInput) => `k ${spec.router} ${wireGuardKeyId(spec.publicKey)}`;
  for (const s of sessions) {
    if (s.spec.ipv6 !== undefined) add(`a ${s.spec.ipv6}`, s);
    if (s.spec.ipv4 !== undefined) add(`a ${s.spec.ipv4}`, s);
    add(keyOf(s.spec), s);
  }
  return (spec) => ({
    routers,
    sessions: new Set([
      ...((spec.ipv6 !== undefined && index.get(`a ${spec.ipv6}`)) || []),
      ...((spec.ipv4 !== undefined && index.get(`a ${spec.ipv4}`)) || []),
      ...(index.get(keyOf(spec)) ?? []),
    ]),
  });
}

/** One file's part in a report. `changed` is false for an unchanged file that the change breaks. */
export interface FileReport {
  file: string;
  changed: boolean;
  problems: FieldError[];
}

/** A problem's reason as people read it: an unchanged file says why it is named at all. */
export function problemReason(file: FileReport, problem: FieldError): string {
  return file.changed ? problem.message : `${problem.message} (the file is unchanged: this change breaks it)`;
}

export interface ChangeReport {
  /** The changed files (every judged file without a base), and unchanged ones the change breaks. */
  files: FileReport[];
  problemCount: number;
  /** What the tree holds after the change. */
  counts: TreeCounts;
}

/**
 * Judge `next`. Without a base every file counts as changed. With one (`next` being the base's tree with
 * the change laid over it), the problems of the changed files count, and the new problems of an unchanged
 * file: the change broke it (a router removed under its sessions, a policy that now refuses it). Those are
 * judged as the store would leave the tree, where a changed file it skips keeps its previous version
 * (docs/store.md): a new session taking a running session's port is the new one's problem only.
 * `refused` are entries of the change refused before they were read (entryProblem), counted when changed.
 */
export function validateChange(
  next: Tree,
  base?: { tree: Tree; changed: ReadonlySet<string> },
  refused: readonly Problem[] = [],
): ChangeReport {
  const cache: ParseCache = new Map();
  const after = validateTree(next, cache);
  const files = new Map<string, FileReport>();
  const file = (path: string, changed: boolean): FileReport => {
    let report = files.get(path);
    if (!report) files.set(path, (report = { file: path, changed, problems: [] }));
    return report;
  };
  let problemCount = 0;
  const report = (p: Problem, changed: boolean) => {
    const { file: path, ...error } = p;
    file(path, changed).problems.push(error);
    problemCount++;
  };
  for (const path of [...next.keys()].filter(isJudgedPath))
    if (!base || base.changed.has(path)) file(path, true);
  // entries of the change refused before they were read (entryProblem): not in `next` at all
  for (const p of refused) if (!base || base.changed.has(p.file)) report(p, true);
  if (!base) for (const p of after.problems) report(p, true);
  else {
    const skipped = new Set<string>();
    for (const p of after.problems)
      if (base.changed.has(p.file)) {
        report(p, true);
        skipped.add(p.file);
      }
    const applied = new Map(next);
    for (const path of skipped) {
      const previous = base.tree.get(path);
      if (previous === undefined) applied.delete(path);
      else applied.set(path, previous);
    }
    const key = (p: Problem) => `${p.file}\0${p.pointer}\0${p.message}`;
    const unchanged = (skipped.size > 0 ? validateTree(applied, cache) : after).problems.filter(
      (p) => !base.changed.has(p.file),
    );
    // the base is judged only when needed: a large network's push waits for each judgement
    const before =
      unchanged.length > 0 ? new Set(validateTree(base.tree, cache).problems.map(key)) : new Set();
    for (const p of unchanged) if (!before.has(key(p))) report(p, false);
  }
  return {
    files: [...files.values()].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0)),
    problemCount,
    counts: after.counts,
  };
}

/**
 * Why a judged entry of a git tree is refused before it is read (docs/gitops.md, "Checked pushes"), if it
 * is: the store reads regular files only, and a submodule's content or a link's target is not in the
 * tree it reads (the store would skip a submodule without a word); a file over MANIFEST_LIMITS is not
 * read at all.
 */
export function entryProblem(mode: string, size: number, path: string): FieldSaid | undefined {
  if (mode === '160000') return { key: 'field.submodule', params: {} };
  if (mode === '120000') return { key: 'field.symlink', params: {} };
  const limit = manifestByteLimit(path);
  return size > limit ? tooLarge(size, limit) : undefined;
}
