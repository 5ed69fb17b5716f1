/**
 * Manifest files of a GitOps repository (docs/store.md, "Repository layout"): where each kind lives and how a file is
 * parsed and validated. Shared by the git store and `peerops validate`, so both judge a file alike; the
 * rules that span files are in rules/.
 */
import { CORE_SCHEMA, dump, load } from 'js-yaml';
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

export type ParseResult = { ok: true; manifest: ParsedManifest } | { ok: false; errors: FieldError[] };

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

export function parseYaml(text: string): unknown {
  return load(text, { schema: CORE_SCHEMA });
}

/** Parse and validate one file; the path must agree with kind, metadata.name and (for sessions) spec. */
export function parseManifest(path: string, text: string): ParseResult {
  const info = classifyPath(path);
  if (!info) {
    return {
      ok: false,
      errors: [
        {
          pointer: '/',
          message:
            'file path is not part of the layout (routers/<name>.yaml, sessions/<router>/as<asn>.yaml, policy/<name>.yaml)',
        },
      ],
    };
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
    return { ok: false, errors: [{ pointer: '/', message: `not valid YAML: ${reason}` }] };
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
    return { ok: false, errors: [{ pointer: '/', message: 'must be a YAML mapping (a manifest)' }] };
  }
  const kind = (doc as { kind?: unknown }).kind;
  if (kind !== info.kind) {
    return {
      ok: false,
      errors: [{ pointer: '/kind', message: `must be ${info.kind} for a file at ${path}` }],
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
  if (!result.ok) return { ok: false, errors: result.errors };
  const { metadata, spec } = result.value;
  const errors: FieldError[] = [];
  if (metadata.name !== info.name) {
    errors.push({ pointer: '/metadata/name', message: `must be ${info.name} for a file at ${path}` });
  }
  if (info.kind === 'PeeringSession') {
    const s = spec as SessionSpecInput;
    if (s.router !== info.router) {
      errors.push({ pointer: '/spec/router', message: `must be ${info.router} for a file at ${path}` });
    }
    if (s.asn !== info.asn) {
      errors.push({ pointer: '/spec/asn', message: `must be ${info.asn} for a file at ${path}` });
    }
  }
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, manifest: { kind: info.kind, name: info.name, spec } as ParsedManifest };
}

/** The YAML of a manifest as the store writes it (spec only: status lives on its own ref). */
export function renderManifest(kind: ManifestKind, name: string, spec: object): string {
  return dump({ apiVersion: GROUP_VERSION, kind, metadata: { name }, spec }, { schema: CORE_SCHEMA });
}
