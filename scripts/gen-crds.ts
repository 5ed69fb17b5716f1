/**
 * Generates the CustomResourceDefinitions (crds/*.yaml, copied into charts/peerops/crds/) from the shared
 * TypeBox schemas in common/schema.ts, so the API server validates exactly what the REST API does.
 * `node scripts/gen-crds.ts` writes the files; `renderCrds()` returns them for the "files are current" test.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump } from 'js-yaml';
import { englishText } from '../common/messages.ts';
import { API_GROUP, API_VERSION, KINDS, type Kind } from '../common/schema.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const CRD_DIRS = ['crds', join('charts', 'peerops', 'crds')];

/** The Ready condition's status (common/conditions.ts), as `kubectl get` shows it. */
const READY: JsonObject = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};

const PRINTER_COLUMNS: Record<Kind, JsonObject[]> = {
  Router: [
    READY,
    { name: 'Node', type: 'integer', jsonPath: '.spec.nodeId' },
    { name: 'Region', type: 'string', jsonPath: '.spec.region' },
    { name: 'Endpoint', type: 'string', jsonPath: '.spec.endpointHost' },
    { name: 'Heartbeat', type: 'date', jsonPath: '.status.lastHeartbeat' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
  PeeringSession: [
    READY,
    { name: 'Status', type: 'string', jsonPath: '.status.name' },
    { name: 'Router', type: 'string', jsonPath: '.spec.router' },
    { name: 'ASN', type: 'integer', jsonPath: '.spec.asn' },
    { name: 'Port', type: 'integer', jsonPath: '.spec.listenPort', priority: 1 },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
  RoutingPolicy: [READY, { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }],
};

/**
 * Kinds without the status subresource: one write carries spec, status and the events they cause, so no
 * reader sees a session's spec without its status (docs/kubernetes.md, "One write per change").
 */
const SPEC_WITH_STATUS: ReadonlySet<Kind> = new Set(['PeeringSession']);

const SHORT_NAMES: Record<Kind, string[]> = {
  Router: ['rtr'],
  PeeringSession: ['ps', 'peering'],
  RoutingPolicy: ['rp'],
};

/**
 * Rules across a spec's fields, which a structural schema cannot say, as CEL for the API server, so that
 * `kubectl apply` is refused with the store's words instead of the object being skipped by the store
 * (docs/kubernetes.md). Each restates a rule of common/rules/, which stays the one the store applies.
 */
const SPEC_RULES: Partial<Record<Kind, JsonObject[]>> = {
  // common/rules/sessions.ts sessionIpv6Errors
  PeeringSession: [
    {
      rule: 'has(self.ipv6) || has(self.adopted)',
      message: `spec.ipv6 ${englishText('field.ipv6UnlessAdopted')}`,
    },
  ],
};

/** Go's regexp (RE2) has no \uXXXX escape: rewrite to \x{XXXX}, which it does have. */
function goPattern(pattern: string): string {
  return pattern.replace(/\\u([0-9a-fA-F]{4})/g, '\\x{$1}');
}

const isConst = (s: Json): s is JsonObject & { const: Json } =>
  typeof s === 'object' && s !== null && !Array.isArray(s) && 'const' in s;
const isNull = (s: Json): boolean =>
  typeof s === 'object' && s !== null && !Array.isArray(s) && s['type'] === 'null';

/**
 * One JSON Schema node to a structural openAPIV3Schema node: `$id`, `default` (the API server would write
 * defaults into stored objects, so a round trip would not give back what was written) and
 * `additionalProperties: false` (pruning does that job) are dropped; `const` and anyOf-of-consts become
 * `enum`; a union with null becomes `nullable: true`; a record becomes `additionalProperties: <schema>`.
 */
export function toStructural(node: Json): JsonObject {
  if (typeof node !== 'object' || node === null || Array.isArray(node))
    throw new Error(`schema node is not an object: ${JSON.stringify(node)}`);
  const anyOf = node['anyOf'];
  if (Array.isArray(anyOf)) {
    const rest = anyOf.filter((s) => !isNull(s));
    const nullable = rest.length < anyOf.length;
    let out: JsonObject;
    if (rest.length > 0 && rest.every(isConst)) {
      const values = rest.map((s) => (s as { const: Json }).const);
      out = { type: typeof values[0] === 'number' ? 'number' : 'string', enum: values };
    } else if (rest.length === 1 && rest[0] !== undefined) {
      out = toStructural(rest[0]);
    } else {
      throw new Error(`cannot express anyOf as a structural schema: ${JSON.stringify(node)}`);
    }
    if (typeof node['description'] === 'string') out['description'] = node['description'];
    return nullable ? { ...out, nullable: true } : out;
  }
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$id' || key === 'default' || key === '$schema') continue;
    if (key === 'additionalProperties' && typeof value === 'boolean') continue;
    if (key === 'const') {
      out['enum'] = [value];
      if (!('type' in node)) out['type'] = typeof value === 'number' ? 'number' : 'string';
    } else if (key === 'pattern' && typeof value === 'string') out['pattern'] = goPattern(value);
    else if (key === 'properties' && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      out['properties'] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toStructural(v)]));
    } else if (key === 'items') out['items'] = toStructural(value);
    else if (key === 'patternProperties' && typeof value === 'object' && value !== null) {
      // a Type.Record: structural schemas express it as additionalProperties
      const schemas = Object.values(value);
      if (schemas.length !== 1 || schemas[0] === undefined)
        throw new Error('record with several key patterns');
      out['additionalProperties'] = toStructural(schemas[0]);
    } else out[key] = value;
  }
  return out;
}

function crd(kind: Kind): JsonObject {
  const entry = KINDS[kind];
  // JSON round trip: TypeBox keeps its bookkeeping under symbol keys, which this drops.
  const spec = toStructural(JSON.parse(JSON.stringify(entry.spec)) as Json);
  const rules = SPEC_RULES[kind];
  if (rules) spec['x-kubernetes-validations'] = rules;
  const properties: JsonObject = {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { type: 'object' },
    spec,
  };
  if (entry.status) properties['status'] = toStructural(JSON.parse(JSON.stringify(entry.status)) as Json);
  const singular = kind.toLowerCase();
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${entry.plural}.${API_GROUP}`,
      labels: { 'app.kubernetes.io/name': 'peerops', 'app.kubernetes.io/part-of': 'peerops' },
    },
    spec: {
      group: API_GROUP,
      scope: 'Namespaced',
      names: { kind, listKind: `${kind}List`, plural: entry.plural, singular, shortNames: SHORT_NAMES[kind] },
      versions: [
        {
          name: API_VERSION,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: `peerops ${kind} (generated from common/schema.ts by scripts/gen-crds.ts)`,
              required: ['spec'],
              properties,
            },
          },
          ...(entry.status && !SPEC_WITH_STATUS.has(kind) ? { subresources: { status: {} } } : {}),
          additionalPrinterColumns: PRINTER_COLUMNS[kind],
        },
      ],
    },
  };
}

/** File name → YAML text for every kind. */
export function renderCrds(): Map<string, string> {
  const files = new Map<string, string>();
  for (const kind of Object.keys(KINDS) as Kind[]) {
    const header =
      '# Generated by scripts/gen-crds.ts from common/schema.ts: do not edit, run `npm run gen:crds`.\n';
    files.set(
      `${API_GROUP}_${KINDS[kind].plural}.yaml`,
      header + dump(crd(kind), { lineWidth: -1, noRefs: true }),
    );
  }
  return files;
}

async function main(): Promise<void> {
  const files = renderCrds();
  for (const dir of CRD_DIRS) {
    await mkdir(join(ROOT, dir), { recursive: true });
    for (const [name, text] of files) await writeFile(join(ROOT, dir, name), text);
  }
  console.log(`wrote ${files.size} CRDs to ${CRD_DIRS.join(' and ')}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
