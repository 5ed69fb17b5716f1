/**
 * Manifest files of a GitOps repository (docs/store.md, "Repository layout"): where each kind lives and how a file is
 * parsed and validated. Shared by the git store and `peerops validate`, so both judge a file alike; the
 * rules that span files are in rules/.
 */
import { CORE_SCHEMA, EVENT_ID, YAMLException, constructFromEvents, dump, parseEvents } from 'js-yaml';
import type { FieldError } from './errors.ts';
import { sessionName } from './naming.ts';
import {
  GROUP_VERSION,
  PolicyManifest,
  RouterManifest,
  SessionManifestInput,
  type PolicySpec,
  type RouterSpec,
  type SessionSpecInput,
  upgradeRouterSpec,
} from './schema.ts';
import { validate } from './validate.ts';
import { sessionIpv6Errors } from './rules/sessions.ts';
import { fieldError, type FieldSaid } from './messages.ts';

export type ManifestKind = 'Router' | 'PeeringSession' | 'RoutingPolicy';

/** What a path says a file must hold. */
export type PathInfo =
  | { kind: 'Router'; name: string }
  | { kind: 'PeeringSession'; name: string; router: string; asn: number }
  | { kind: 'RoutingPolicy'; name: string };

export type ParsedManifest =
  | { kind: 'Router'; name: string; spec: RouterSpec }
  | { kind: 'PeeringSession'; name: string; spec: SessionSpecInput }
  | { kind: 'RoutingPolicy'; name: string; spec: PolicySpec };

/**
 * Why a file was refused, as the store's metric labels it (peerops_store_manifests_skipped{reason}):
 * a bound of MANIFEST_LIMITS, YAML that does not parse, a path outside the layout, or the schema (kind,
 * fields, path agreement).
 */
export type RefusalReason = 'too_large' | 'too_deep' | 'anchors' | 'yaml' | 'layout' | 'schema';

export type ParseResult =
  { ok: true; manifest: ParsedManifest } | { ok: false; reason: RefusalReason; errors: FieldError[] };

/**
 * The bounds of one manifest, checked before it is parsed into values or walked (docs/store.md, "What
 * the store refuses"). Every reader takes them from here: `peerops validate`, the pre-receive hook, the
 * git store's load and its forge follow. A session or router the store writes is under 2 KiB; a policy
 * may list 100,000 blocked ASNs (schema.ts), about 1.7 MB as the store writes it. No manifest nests
 * deeper than 5 levels. A YAML alias repeats a value without its bytes, so 9 levels of 9 aliases are 9^9
 * values in 650 bytes: aliases and the anchors they name are refused outright.
 */
export const MANIFEST_LIMITS = {
  bytes: { Router: 64 * 1024, PeeringSession: 64 * 1024, RoutingPolicy: 4 * 1024 * 1024 },
  depth: 16,
} as const;

/** The most bytes the file at `path` may hold: its kind's bound, a session's for any other path. */
export function manifestByteLimit(path: string): number {
  return MANIFEST_LIMITS.bytes[classifyPath(path)?.kind ?? 'PeeringSession'];
}

/** A size for people: 65536 → "64 KiB". */
function kib(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MiB` : `${bytes / 1024} KiB`;
}

/** A manifest outside MANIFEST_LIMITS: refused before its values exist. */
export class ManifestBoundError extends Error {
  readonly reason: Extract<RefusalReason, 'too_large' | 'too_deep' | 'anchors'>;
  /** The bound's field error at the manifest's root. */
  readonly error: FieldError;
  constructor(reason: ManifestBoundError['reason'], said: FieldSaid) {
    const error = fieldError('/', said.key, said.params);
    super(error.message);
    this.reason = reason;
    this.error = error;
  }
}

const NAME = '[a-z][a-z0-9-]{0,30}';
const ROUTER_FILE = new RegExp(`^routers/(${NAME})\\.yaml$`);
const SESSION_FILE = new RegExp(`^sessions/(${NAME})/as([1-9][0-9]{0,9})\\.yaml$`);
const POLICY_FILE = new RegExp(`^policy/(${NAME})\\.yaml$`);
const MANIFEST_DIRS = ['routers/', 'sessions/', 'policy/'];

export function routerPath(name: string): string {
  return `routers/${name}.yaml`;
}
export function sessionPath(router: string, asn: number): string {
  return `sessions/${router}/as${asn}.yaml`;
}
export function policyPath(name: string): string {
  return `policy/${name}.yaml`;
}

/** Is this path inside a manifest directory (and so must be a valid manifest)? */
export function isManifestPath(path: string): boolean {
  return MANIFEST_DIRS.some((d) => path.startsWith(d));
}

/** The kind and name a path stands for, or undefined when the path is not a manifest path of the layout. */
export function classifyPath(path: string): PathInfo | undefined {
  let m = ROUTER_FILE.exec(path);
  if (m) return { kind: 'Router', name: m[1] as string };
  m = SESSION_FILE.exec(path);
  if (m) {
    const asn = Number(m[2]);
    if (asn > 4294967295) return undefined;
    const router = m[1] as string;
    return { kind: 'PeeringSession', name: sessionName(asn, router), router, asn };
  }
  m = POLICY_FILE.exec(path);
  if (m) return { kind: 'RoutingPolicy', name: m[1] as string };
  return undefined;
}

/** Why a file of `bytes` is refused. */
export function tooLarge(bytes: number, maxBytes: number): FieldSaid {
  return { key: 'field.fileTooLarge', params: { bytes, max: maxBytes, maxText: kib(maxBytes) } };
}

/** The line (1-based) of a character offset. */
function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let at = text.indexOf('\n'); at >= 0 && at < offset; at = text.indexOf('\n', at + 1)) line++;
  return line;
}

/**
 * One YAML document, within MANIFEST_LIMITS: the size before anything is read, the depth while it is
 * parsed into events, anchors and aliases in the events, before any value is built (ManifestBoundError;
 * YAMLException for YAML that does not parse).
 */
export function parseYaml(text: string, maxBytes: number = MANIFEST_LIMITS.bytes.PeeringSession): unknown {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) throw new ManifestBoundError('too_large', tooLarge(bytes, maxBytes));
  let events: ReturnType<typeof parseEvents>;
  try {
    events = parseEvents(text, { maxDepth: MANIFEST_LIMITS.depth });
  } catch (err) {
    if (err instanceof YAMLException && err.reason.startsWith('nesting exceeded maxDepth'))
      throw new ManifestBoundError(
        'too_deep',
        err.mark
          ? { key: 'field.yamlTooDeepAt', params: { line: err.mark.line + 1, depth: MANIFEST_LIMITS.depth } }
          : { key: 'field.yamlTooDeep', params: { depth: MANIFEST_LIMITS.depth } },
      );
    throw err;
  }
  for (const e of events) {
    if (!('anchorStart' in e) || e.anchorStart < 0) continue;
    const name = text.slice(e.anchorStart, e.anchorEnd);
    const form = e.type === EVENT_ID.ALIAS ? `alias *${name}` : `anchor &${name}`;
    throw new ManifestBoundError('anchors', {
      key: 'field.yamlAnchor',
      params: { line: lineAt(text, e.anchorStart), form },
    });
  }
  const documents = constructFromEvents(events, { source: text, schema: CORE_SCHEMA });
  if (documents.length !== 1)
    throw new YAMLException(
      documents.length === 0 ? 'the file is empty' : 'holds more than one YAML document',
    );
  return documents[0];
}

/** Parse and validate one file; the path must agree with kind, metadata.name and (for sessions) spec. */
export function parseManifest(path: string, text: string): ParseResult {
  const info = classifyPath(path);
  if (!info) {
    return {
      ok: false,
      reason: 'layout',
      errors: [fieldError('/', 'field.notInLayout')],
    };
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, MANIFEST_LIMITS.bytes[info.kind]);
  } catch (err) {
    if (err instanceof ManifestBoundError) return { ok: false, reason: err.reason, errors: [err.error] };
    const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
    return {
      ok: false,
      reason: 'yaml',
      errors: [fieldError('/', 'field.notYaml', { reason: reason ?? '' })],
    };
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
    return {
      ok: false,
      reason: 'schema',
      errors: [fieldError('/', 'field.notMapping')],
    };
  }
  const kind = (doc as { kind?: unknown }).kind;
  if (kind !== info.kind) {
    return {
      ok: false,
      reason: 'schema',
      errors: [fieldError('/kind', 'field.pathMismatch', { expected: info.kind, path })],
    };
  }
  const schema =
    info.kind === 'Router'
      ? RouterManifest
      : info.kind === 'RoutingPolicy'
        ? PolicyManifest
        : SessionManifestInput;
  // a Router stored with a numeric dn42Region (before regions had names) loads with the name
  const input =
    info.kind === 'Router' ? { ...doc, spec: upgradeRouterSpec((doc as { spec?: unknown }).spec) } : doc;
  const result = validate<{ metadata: { name: string }; spec: unknown }>(schema, input);
  if (!result.ok) return { ok: false, reason: 'schema', errors: result.errors };
  const { metadata, spec } = result.value;
  const errors: FieldError[] = [];
  if (metadata.name !== info.name) {
    errors.push(fieldError('/metadata/name', 'field.pathMismatch', { expected: info.name, path }));
  }
  if (info.kind === 'PeeringSession') {
    const s = spec as SessionSpecInput;
    if (s.router !== info.router) {
      errors.push(fieldError('/spec/router', 'field.pathMismatch', { expected: info.router, path }));
    }
    if (s.asn !== info.asn) {
      errors.push(fieldError('/spec/asn', 'field.pathMismatch', { expected: info.asn, path }));
    }
    errors.push(...sessionIpv6Errors(s, '/spec'));
  }
  if (errors.length > 0) return { ok: false, reason: 'schema', errors };
  return { ok: true, manifest: { kind: info.kind, name: info.name, spec } as ParsedManifest };
}

/** The YAML of a manifest as the store writes it (spec only: status lives on its own ref). */
export function renderManifest(kind: ManifestKind, name: string, spec: object): string {
  return dump({ apiVersion: GROUP_VERSION, kind, metadata: { name }, spec }, { schema: CORE_SCHEMA });
}
