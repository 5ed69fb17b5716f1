/**
 * JSON Schema → fast-check, for the schemas GET /openapi.json serves (docs/api.md): `valid` draws values the
 * schema accepts, `hostile` values it must refuse or that sit at its edges (wrong types, out-of-range numbers,
 * huge, control or bidi strings, extra and missing fields, null, arrays for objects, deep nesting). It reads
 * only the keywords the controller's schemas use; a type or format it does not know is an error.
 */
import fc, { type Arbitrary } from 'fast-check';

type JsonType = 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean' | 'null';

export interface Schema {
  type?: JsonType | JsonType[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  const?: unknown;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
}

/** Values to mix in by property name (an existing router, a session's uuid), so requests reach past lookups. */
export type Hints = Record<string, Arbitrary<unknown>>;

/**
 * JSON text spliced in as it is by `toJson`: nesting thousands of levels deep (JSON.stringify would recurse
 * on it) and numbers JSON.stringify never writes (1e999, 1E2, -0.0, 30 digits).
 */
export class RawJson {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
  /** How fast-check prints a counterexample: 60 KB of brackets are of no help there. */
  [fc.toStringMethod](): string {
    const t = this.text;
    return `RawJson(${t.length > 40 ? `${t.slice(0, 16)}…${t.slice(-16)}, ${t.length} chars` : t})`;
  }
}

/** JSON text of a generated value; `replace` maps placeholders (hints resolved at send time). */
export function toJson(value: unknown, replace: (v: unknown) => unknown = (v) => v): string {
  const raw: RawJson[] = [];
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (v instanceof RawJson) return `\u0000raw${raw.push(v) - 1}\u0000`;
    return replace(v);
  });
  return text.replace(/"\\u0000raw(\d+)\\u0000"/g, (_m, i: string) => raw[Number(i)]?.text ?? 'null');
}

const hex16 = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
const port = fc.integer({ min: 1, max: 65535 });
// DN42 addresses mostly (172.20.0.0/14, fd00::/8), so creates land inside the policy's ranges; any other
// address too, for the rules that refuse it
const octet = fc.integer({ min: 0, max: 255 });
const ipv4 = fc.oneof(
  {
    arbitrary: fc.tuple(fc.integer({ min: 20, max: 23 }), octet, octet).map((o) => `172.${o.join('.')}`),
    weight: 3,
  },
  fc.ipV4(),
);
const ipv6 = fc.oneof(
  { arbitrary: fc.tuple(hex16, hex16, hex16).map(([a, b, c]) => `fd42:${a}:${b}::${c}`), weight: 3 },
  fc.ipV6(),
);
const host = fc.oneof(fc.domain(), ipv4);

/** Generators of the formats of common/validate.ts. */
const FORMATS: Record<string, Arbitrary<string>> = {
  uuid: fc.uuid(),
  ipv4,
  ipv6,
  'link-local': fc.tuple(hex16, hex16).map(([a, b]) => `fe80::${a}:${b}`),
  'wireguard-key': fc
    .uint8Array({ minLength: 32, maxLength: 32 })
    .map((b) => Buffer.from(b).toString('base64')),
  endpoint: fc.oneof(
    fc.tuple(host, port).map(([h, p]) => `${h}:${p}`),
    fc.tuple(ipv6, port).map(([h, p]) => `[${h}]:${p}`),
  ),
  host,
  // host bits zero: a prefix, not an address inside one
  'ipv4-prefix': fc
    .tuple(
      fc.integer({ min: 0, max: 255 }),
      fc.integer({ min: 0, max: 255 }),
      fc.integer({ min: 16, max: 24 }),
    )
    .map(([a, b, len]) => `${a}.${b}.0.0/${len}`),
  'ipv6-prefix': fc
    .tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 16, max: 64 }))
    .map(([b, len]) => `fd${b.toString(16).padStart(2, '0')}::/${len}`),
  'date-time': fc
    .date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
    .map((d) => d.toISOString()),
};

/** fc.integer is 32-bit; the schemas go to 2^32 - 1 (ASNs). */
function integer(min = -(2 ** 40), max = 2 ** 40): Arbitrary<number> {
  return fc.oneof(fc.constantFrom(min, max), fc.bigInt({ min: BigInt(min), max: BigInt(max) }).map(Number));
}

function string(s: Schema): Arbitrary<string> {
  const min = s.minLength ?? 0;
  const max = s.maxLength ?? 64;
  if (s.format !== undefined) {
    const f = FORMATS[s.format];
    if (!f) throw new Error(`schema-arbitrary: no generator for format ${s.format}`);
    return f;
  }
  if (s.pattern !== undefined)
    return fc
      .stringMatching(new RegExp(s.pattern))
      .map((v) => v.slice(0, max))
      .filter((v) => v.length >= min && new RegExp(s.pattern ?? '').test(v));
  return fc.string({ minLength: min, maxLength: max, unit: 'grapheme' });
}

export function valid(s: Schema, hints: Hints = {}): Arbitrary<unknown> {
  if (s.const !== undefined) return fc.constant(s.const);
  if (s.enum) return fc.constantFrom(...s.enum);
  if (s.anyOf ?? s.oneOf) return fc.oneof(...(s.anyOf ?? s.oneOf ?? []).map((v) => valid(v, hints)));
  if (Array.isArray(s.type)) return fc.oneof(...s.type.map((type) => valid({ ...s, type }, hints)));
  switch (s.type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return integer(s.minimum, s.maximum);
    case 'number':
      return fc.double({ min: s.minimum, max: s.maximum, noNaN: true, noDefaultInfinity: true });
    case 'string':
      return string(s);
    case 'array':
      return fc.array(valid(s.items ?? {}, hints), {
        minLength: s.minItems ?? 0,
        maxLength: Math.max(Math.min(s.maxItems ?? 4, 4), s.minItems ?? 0),
      });
    case 'object': {
      const model: Record<string, Arbitrary<unknown>> = {};
      for (const [k, v] of Object.entries(s.properties ?? {})) {
        const hint = hints[k];
        model[k] = hint ? fc.oneof({ arbitrary: hint, weight: 3 }, valid(v, hints)) : valid(v, hints);
      }
      return fc.record(model, { requiredKeys: s.required ?? [] });
    }
    default:
      throw new Error(`schema-arbitrary: cannot generate ${JSON.stringify(s).slice(0, 100)}`);
  }
}

/** Strings no field should take as they are: control, bidi, BIRD and shell syntax, odd unicode, huge. */
const hostileString: Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '"; }',
    'x"; protocol bgp evil { neighbor fe80::1 as 1; }; #',
    '$(reboot)',
    'a\nb',
    'nul\u0000byte',
    '\u202eevil\u202c',
    'next\u0085line',
    'para\u2029graph',
    'ｆｅ８０::１',
    '../../etc/passwd',
    '__proto__',
    'fe80::1%eth0',
    '\ud800',
    '\ufeff',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.integer({ min: 65, max: 70_000 }).map((n) => 'A'.repeat(n)),
  fc.string({ unit: fc.integer({ min: 0, max: 0x9f }).map((c) => String.fromCharCode(c)), maxLength: 8 }),
);

/** A value of a JSON type `s` does not allow (or of no allowed type at all). */
const wrongType: Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, '', [], {}, [null], { '': null }),
  fc.jsonValue({ maxDepth: 3 }),
);

const deep: Arbitrary<RawJson> = fc
  .tuple(fc.integer({ min: 1, max: 12_000 }), fc.constantFrom(['[', ']'], ['{"a":', '}']))
  .map(([n, [open = '[', close = ']']]) => new RawJson(open.repeat(n) + '1' + close.repeat(n)));

function hostileNumber(s: Schema): Arbitrary<unknown> {
  const edges: unknown[] = [2 ** 53 + 2, -(2 ** 53) - 2, 1e308, -1e308, 5e-324, 0.5, -0];
  if (s.minimum !== undefined) edges.push(s.minimum - 1, s.minimum - 0.5);
  if (s.maximum !== undefined) edges.push(s.maximum + 1, s.maximum + 0.5);
  const spellings = ['1e999', '-1e999', '1E2', '-0.0', '1.0', '123456789012345678901234567890'];
  return fc.oneof(
    fc.constantFrom(...edges),
    fc.constantFrom(...spellings.map((t) => new RawJson(t))),
    valid(s).map((n) => String(n)),
  );
}

function hostileObject(s: Schema, hints: Hints): Arbitrary<unknown> {
  const props = Object.keys(s.properties ?? {});
  const base = valid(s, hints) as Arbitrary<Record<string, unknown>>;
  const mutations: Arbitrary<unknown>[] = [
    // an extra field, sometimes one the prototype would carry
    fc
      .tuple(
        base,
        fc.constantFrom('extra', '__proto__', 'constructor', 'x'.repeat(200)),
        fc.oneof(wrongType, deep),
      )
      .map(([o, k, v]) => ({ ...o, [k]: v })),
    fc.array(base, { minLength: 1, maxLength: 2 }),
  ];
  if (props.length === 0) return fc.oneof(...mutations);
  // one field replaced by a hostile value of its own schema; or left out (required or not)
  const replaced = fc
    .constantFrom(...props)
    .chain((k) =>
      fc.tuple(base, hostile(s.properties?.[k] ?? {}, hints)).map(([o, v]) => ({ ...o, [k]: v })),
    );
  const removed = fc.tuple(base, fc.constantFrom(...props)).map(([o, k]) => {
    const copy = { ...o };
    delete copy[k];
    return copy;
  });
  return fc.oneof({ arbitrary: replaced, weight: 4 }, removed, ...mutations);
}

/** A value `s` should refuse, or one at its edges. */
export function hostile(s: Schema, hints: Hints = {}): Arbitrary<unknown> {
  if (Array.isArray(s.type)) return fc.oneof(...s.type.map((type) => hostile({ ...s, type }, hints)));
  const own: Arbitrary<unknown>[] = [wrongType, hostileString, deep];
  // mostly a mutation of a valid value, which gets further into the handler than a wrong type does
  const variants = s.anyOf ?? s.oneOf;
  if (variants)
    return fc.oneof(...own, ...variants.map((v) => ({ arbitrary: hostile(v, hints), weight: 2 })));
  if (s.type === 'object') return fc.oneof(...own, { arbitrary: hostileObject(s, hints), weight: 6 });
  if (s.type === 'array') {
    own.push(fc.array(hostile(s.items ?? {}, hints), { minLength: 1, maxLength: 3 }));
    if (s.maxItems !== undefined && s.maxItems < 1000)
      own.push(
        valid(s.items ?? {}, hints).map((v) => Array.from({ length: (s.maxItems ?? 0) + 1 }, () => v)),
      );
  } else if (s.type === 'integer' || s.type === 'number') own.push(hostileNumber(s));
  else if (s.type === 'string')
    own.push(
      valid(s, hints).map((v) => (typeof v === 'string' ? v.toUpperCase() + ' ' : v)),
      valid(s, hints).map((v) => (typeof v === 'string' ? `${v}\n` : v)),
    );
  return fc.oneof(...own);
}
