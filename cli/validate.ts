/**
 * `peerops validate [dir]`: checks a GitOps repository checkout (routers/, sessions/, policy/) with the
 * same manifest rules the git store applies, plus what the store tolerates but an operator should fix.
 * Prints `file: /pointer: reason` per problem; exit status 1 on any problem, 0 with a summary when clean.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import type { FieldError } from '../common/errors.ts';
import type { PolicySpec, RouterSpec, SessionSpecInput } from '../common/schema.ts';
import { isManifestPath, parseManifest, parseYaml } from '../controller/store/git/manifests.ts';
import {
  mergePolicies,
  policyWarnings,
  routerSetErrors,
  sessionAddressingErrors,
  sessionSetErrors,
  type ManifestSet,
} from '../controller/store/rules.ts';
import { usageError } from '../common/usage.ts';

const USAGE = `usage: peerops validate [dir]

Checks the manifests of a GitOps repository checkout (default: the current directory):
  routers/<name>.yaml, sessions/<router>/as<asn>.yaml, policy/<name>.yaml

Reports schema errors, file paths that do not match metadata/spec, duplicate sessions, listen port
clashes, unknown routers, blocked ASNs and a default policy without dn42Asn, one per line as
  <file>: <json pointer>: <reason>
Exit status: 0 when clean, 1 on any problem, 2 on a usage error.`;

export interface Problem extends FieldError {
  file: string;
}

export interface ValidationReport {
  problems: Problem[];
  counts: { routers: number; sessions: number; policies: number };
}

async function listFiles(root: string, dir: string): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(join(root, dir), { withFileTypes: true, recursive: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return entries
    .filter((e) => e.isFile() || e.isSymbolicLink())
    .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join('/'));
}

/** The (ASN, router) a session file claims in its spec, read before validation: a file whose path does
 * not match its spec must still count as a duplicate. */
function sessionPair(text: string): { key: string; asn: number; router: string } | undefined {
  try {
    const spec = (parseYaml(text) as { spec?: { asn?: unknown; router?: unknown } } | undefined)?.spec;
    if (typeof spec?.asn === 'number' && typeof spec.router === 'string') {
      return { key: `${spec.asn}/${spec.router}`, asn: spec.asn, router: spec.router };
    }
  } catch {
    // not YAML: parseManifest reports it
  }
  return undefined;
}

/** Validate every manifest under `root`. */
export async function validateRepository(root: string): Promise<ValidationReport> {
  const problems: Problem[] = [];
  const add = (file: string, errors: FieldError[]) => {
    for (const e of errors) problems.push({ file, ...e });
  };
  const files = (await Promise.all(['routers', 'sessions', 'policy'].map((d) => listFiles(root, d))))
    .flat()
    .filter(isManifestPath)
    .sort();

  const routers: { file: string; name: string; spec: RouterSpec }[] = [];
  const sessions: { file: string; name: string; spec: SessionSpecInput }[] = [];
  const policies: { file: string; name: string; spec: PolicySpec }[] = [];
  const pairs = new Map<string, string>();
  for (const file of files) {
    const text = await readFile(join(root, file), 'utf8');
    const pair = sessionPair(text);
    if (file.startsWith('sessions/') && pair) {
      const first = pairs.get(pair.key);
      if (first) {
        problems.push({
          file,
          pointer: '/spec',
          message: `a second session for AS${pair.asn} on router ${pair.router} (first in ${first})`,
        });
      } else pairs.set(pair.key, file);
    }
    const result = parseManifest(file, text);
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
      pointer: '/',
      message: 'is missing: the network needs a default policy',
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
  const set: ManifestSet = {
    router: (name) => routers.find((r) => r.name === name)?.spec,
    policyFor: (router) => mergePolicies(defaultPolicy?.spec, policies.find((p) => p.name === router)?.spec),
    portOwner: (router, port, self) => byPort.get(`${router}:${port}`)?.find((n) => n !== self),
    sessionUuidOwner: (uuid, self) => byUuid.get(uuid)?.find((n) => n !== self),
  };
  for (const s of sessions) {
    add(s.file, sessionSetErrors(s.name, s.spec, set));
    // what the API refuses at create; the store serves such a session, so the pull request is the place
    const router = set.router(s.spec.router);
    if (!router) continue;
    const policy = set.policyFor(s.spec.router);
    add(s.file, sessionAddressingErrors(s.name, s.spec, router, policy, { routers, sessions }, '/spec'));
  }

  // stable: problems of one file keep their order
  problems.sort((x, y) => (x.file < y.file ? -1 : x.file > y.file ? 1 : 0));
  return {
    problems,
    counts: { routers: routers.length, sessions: sessions.length, policies: policies.length },
  };
}

export async function main(argv: string[]): Promise<number> {
  const args = argv.filter((a) => a !== '--');
  if (args.includes('--help') || args.includes('-h')) {
    console.log(USAGE);
    return 0;
  }
  const unknown = args.find((a) => a.startsWith('-'));
  if (unknown || args.length > 1)
    return usageError(`${unknown ? `unknown option ${unknown}` : 'at most one directory'}\n\n${USAGE}`);
  const root = args[0] ?? '.';
  let report: ValidationReport;
  try {
    // a mistyped path is not "a repository without a default policy"
    if (!(await stat(root)).isDirectory()) throw new Error('not a directory');
    report = await validateRepository(root);
  } catch (err) {
    return usageError(`cannot read ${root}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const { problems, counts } = report;
  for (const p of problems) console.log(`${p.file}: ${p.pointer}: ${p.message}`);
  const summary = `${counts.routers} router(s), ${counts.sessions} session(s), ${counts.policies} policy file(s)`;
  if (problems.length > 0) {
    console.error(`peerops validate: ${problems.length} problem(s) in ${summary}`);
    return 1;
  }
  console.log(`peerops validate: ok: ${summary}`);
  return 0;
}
