/**
 * One ajv instance for every schema of schema.ts, with the formats those schemas name. validate() returns
 * the value with defaults applied and addresses in canonical form, or field errors as JSON pointers.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { Static, TSchema } from 'typebox';
import type { FieldError } from './errors.ts';
import type { DomainError } from './errors.ts';
import { UNPRINTABLE_CLASS } from './text.ts';
import {
  englishText,
  fault,
  FIELD_MESSAGES,
  type FieldMessageKey,
  type FieldSaid,
  type MessageParams,
} from './messages.ts';
import { Condition, RouterName, RouterSpec } from './schema.ts';
import {
  canonicalEndpoint,
  canonicalIpv6,
  isHost,
  isIpv4,
  isIpv6,
  isLinkLocal,
  canonicalPrefix,
  isPrefix,
  isWireGuardKey,
  parseEndpoint,
  prefixProblem,
} from './net.ts';

// ajv-formats ships CommonJS with a default export; under nodenext the callable sits on .default.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

export const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: false });
addFormats(ajv, ['uuid', 'date-time']);
ajv.addFormat('ipv6', { type: 'string', validate: isIpv6 });
ajv.addFormat('ipv4', { type: 'string', validate: isIpv4 });
ajv.addFormat('link-local', { type: 'string', validate: isLinkLocal });
ajv.addFormat('wireguard-key', { type: 'string', validate: isWireGuardKey });
ajv.addFormat('endpoint', { type: 'string', validate: (v: string) => parseEndpoint(v) !== undefined });
ajv.addFormat('host', { type: 'string', validate: isHost });
ajv.addFormat('ipv4-prefix', { type: 'string', validate: (v: string) => isPrefix(v, 'ipv4') });
ajv.addFormat('ipv6-prefix', { type: 'string', validate: (v: string) => isPrefix(v, 'ipv6') });

/** The catalogue keys of JSON types, for ajv's `type` errors. */
const TYPE_KEYS: Record<string, FieldMessageKey> = {
  string: 'field.notString',
  integer: 'field.notInteger',
  number: 'field.notNumber',
  boolean: 'field.notBoolean',
  object: 'field.notObject',
  array: 'field.notArray',
  null: 'field.notNull',
};

/** The catalogue entry (common/messages.ts) of an ajv error: the sentence a peer reads for the field. */
function fieldReason(e: ErrorObject): { key: FieldMessageKey; params: MessageParams } {
  const p = e.params as Record<string, unknown>;
  const limit = Number(p.limit);
  switch (e.keyword) {
    case 'required':
      return { key: 'field.required', params: {} };
    case 'additionalProperties':
      return { key: 'field.unknown', params: {} };
    case 'minLength':
      return limit === 1
        ? { key: 'field.empty', params: {} }
        : { key: 'field.tooShort', params: { min: limit } };
    case 'maxLength':
      return { key: 'field.tooLong', params: { max: limit } };
    case 'minItems':
      return limit === 1
        ? { key: 'field.empty', params: {} }
        : { key: 'field.tooFew', params: { min: limit } };
    case 'maxItems':
      return { key: 'field.tooMany', params: { max: limit } };
    case 'minimum':
      return { key: 'field.atLeast', params: { limit } };
    case 'maximum':
      return { key: 'field.atMost', params: { limit } };
    case 'exclusiveMinimum':
      return { key: 'field.above', params: { limit } };
    case 'exclusiveMaximum':
      return { key: 'field.below', params: { limit } };
    case 'uniqueItems':
      return { key: 'field.duplicates', params: {} };
    case 'enum': {
      const allowed = (p.allowedValues as unknown[] | undefined) ?? [];
      return { key: 'field.oneOf', params: { allowed: allowed.map(String).join(', ') } };
    }
    case 'pattern':
      return {
        key: String(p.pattern).includes(UNPRINTABLE_CLASS) ? 'field.printable' : 'field.pattern',
        params: {},
      };
    case 'format': {
      const key = `field.format.${String(p.format)}`;
      return {
        key: Object.hasOwn(FIELD_MESSAGES, key) ? (key as FieldMessageKey) : 'field.invalid',
        params: {},
      };
    }
    case 'type':
      return { key: TYPE_KEYS[String(p.type)] ?? 'field.invalid', params: {} };
    default:
      return { key: 'field.invalid', params: {} };
  }
}

/**
 * The patterns of the schemas in words, keyed by the schema's own pattern: an error that quoted the
 * regular expression told a person nothing they could act on.
 */
const patternOf = (schema: TSchema): unknown => (schema as { pattern?: unknown }).pattern;
const PATTERN_WORDS = new Map<unknown, FieldMessageKey>([
  [patternOf(RouterName), 'field.pattern.routerName'],
  [patternOf(RouterSpec.properties.region), 'field.pattern.region'],
  [patternOf(RouterSpec.properties.agentTokenSha256), 'field.pattern.sha256'],
  [patternOf(Condition.properties.type), 'field.pattern.conditionType'],
  [patternOf(Condition.properties.reason), 'field.pattern.conditionReason'],
]);

/** Formats whose message depends on the value: the reason net.ts gives (leading zeros, host bits). */
const FORMAT_REASONS: Record<string, (value: string) => FieldSaid | undefined> = {
  'ipv4-prefix': (v) => prefixProblem(v, 'ipv4'),
  'ipv6-prefix': (v) => prefixProblem(v, 'ipv6'),
};

/** The value at an ajv instancePath (`/a/0/b`) of the validated input. */
function valueAt(data: unknown, instancePath: string): unknown {
  let node = data;
  for (const raw of instancePath.split('/').slice(1)) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

const compiled = new WeakMap<object, ValidateFunction>();
const withDefaults = new WeakMap<object, boolean>();

/** Whether ajv would write defaults into the value: only then does validation need its own copy. */
function hasDefaults(schema: TSchema): boolean {
  let found = withDefaults.get(schema);
  if (found === undefined) {
    found = JSON.stringify(schema).includes('"default":');
    withDefaults.set(schema, found);
  }
  return found;
}

/**
 * The schema with every `default` removed: for partial updates, where a field left out means "keep it",
 * and a default filled in by validation would silently reset it.
 */
export function withoutDefaults<T extends TSchema>(schema: T): T {
  const strip = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(strip);
    if (typeof node !== 'object' || node === null) return node;
    // own symbol keys too: TypeBox marks its schemas with them
    const copy: Record<PropertyKey, unknown> = {};
    for (const key of Reflect.ownKeys(node))
      if (key !== 'default') copy[key] = strip((node as Record<PropertyKey, unknown>)[key]);
    return copy;
  };
  return strip(schema) as T;
}

function compile(schema: TSchema): ValidateFunction {
  let fn = compiled.get(schema);
  if (!fn) {
    fn = ajv.compile(schema);
    compiled.set(schema, fn);
  }
  return fn;
}

function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** ajv errors → `{pointer, message}`, pointing at the field itself (also for missing and unknown fields). */
export function toFieldErrors(
  errors: readonly ErrorObject[] | null | undefined,
  base = '',
  data?: unknown,
): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  // a format's sentence names the form, length included: "at least 44 characters" beside it adds nothing
  const formatted = new Set((errors ?? []).filter((e) => e.keyword === 'format').map((e) => e.instancePath));
  /** Where in `out` the first branch of an anyOf said "must be …" for a pointer. */
  const alternatives = new Map<string, number>();
  for (const e of errors ?? []) {
    if ((e.keyword === 'minLength' || e.keyword === 'maxLength') && formatted.has(e.instancePath)) continue;
    let pointer = base + e.instancePath;
    let { key: messageKey, params } = fieldReason(e);
    if (e.keyword === 'required') {
      pointer += `/${escapePointer(String(e.params.missingProperty))}`;
    } else if (e.keyword === 'additionalProperties') {
      pointer += `/${escapePointer(String(e.params.additionalProperty))}`;
    } else if (e.keyword === 'format') {
      const format = String(e.params.format);
      const value = FORMAT_REASONS[format] ? valueAt(data, e.instancePath) : undefined;
      const said = typeof value === 'string' ? FORMAT_REASONS[format]?.(value) : undefined;
      if (said) ({ key: messageKey, params } = said);
    } else if (e.keyword === 'pattern') {
      const pattern = String(e.params.pattern);
      messageKey = pattern.includes(UNPRINTABLE_CLASS)
        ? pattern.includes('"')
          ? 'field.printableNoQuotes'
          : 'field.printable'
        : (PATTERN_WORDS.get(pattern) ?? 'field.pattern');
    } else if (e.keyword === 'anyOf' || e.keyword === 'const') {
      continue; // the branch errors say more
    }
    const message = englishText(messageKey, params);
    // a value no branch of an anyOf takes: one line, "must be a UUID or a name of …"
    const anyOf = /^(.*\/anyOf)\/\d+\//.exec(e.schemaPath)?.[1];
    const branch = anyOf !== undefined && message.startsWith('must be ') ? `${pointer}\u0000${anyOf}` : '';
    const first = alternatives.get(branch);
    if (first !== undefined) {
      const prev = out[first];
      const words = message.slice('must be '.length);
      if (prev && !prev.message.includes(words))
        out[first] = { ...prev, message: `${prev.message} or ${words}` };
      continue;
    }
    const key = `${pointer}\u0000${message}`;
    if (!seen.has(key)) {
      seen.add(key);
      if (branch) alternatives.set(branch, out.length);
      out.push({
        pointer: pointer || '/',
        message,
        key: messageKey,
        ...(Object.keys(params).length > 0 && { params }),
      });
    }
  }
  return out;
}

export type Validation<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

/**
 * Validate (applying schema defaults to a copy) and canonicalise addresses. The input is never changed
 * and the result shares no object or array with it. The copy before validation is taken only for
 * schemas with defaults: cloning every heartbeat cost more than validating it.
 */
export function validate<T>(schema: TSchema, input: unknown, base = ''): Validation<T> {
  const value = hasDefaults(schema) ? structuredClone(input) : input;
  const fn = compile(schema);
  if (!fn(value)) return { ok: false, errors: toFieldErrors(fn.errors, base, value) };
  return { ok: true, value: canonicalize(schema, value) as T };
}

function invalid(what: string, errors: FieldError[]): DomainError {
  const first = errors[0];
  if (!first) return fault('request.wholeInvalid', { what }, errors);
  return fault('request.invalidField', { what, pointer: first.pointer, reason: first.message }, errors);
}

/** validate() that throws INVALID_REQUEST with the field errors. */
export function validateOrThrow<T>(schema: TSchema, input: unknown, what = 'request'): T {
  const result = validate<T>(schema, input);
  if (!result.ok) throw invalid(what, result.errors);
  return result.value;
}

declare const checkedBrand: unique symbol;

/**
 * A value that checkOrThrow found valid under the schema of its type. The brand exists only for the
 * compiler: a store method taking `Checked<T>` can trust the value without checking it again, and a
 * value that skipped the check does not type-check there.
 */
export type Checked<T> = T & { readonly [checkedBrand]: true };

/**
 * Checks the value itself, without validate()'s copy and canonicalisation: for the agent's hot path
 * (heartbeats, reports, their status patches), where the copy cost more than the check. Only for values
 * the caller owns, under schemas without defaults or address fields (nothing to fill in or rewrite).
 */
export function checkOrThrow<S extends TSchema>(schema: S, value: unknown, what: string): Checked<Static<S>> {
  const fn = compile(schema);
  if (!fn(value)) throw invalid(what, toFieldErrors(fn.errors, '', value));
  return value as Checked<Static<S>>;
}

const ANY: TSchema = {};

/** Walks value along schema and rewrites formatted strings to their one canonical spelling. */
function canonicalize(schema: TSchema, value: unknown): unknown {
  const s = schema as Record<string, unknown>;
  if (typeof value === 'string') {
    switch (s.format) {
      case 'ipv6':
      case 'link-local':
        return canonicalIpv6(value);
      case 'endpoint':
        return canonicalEndpoint(value);
      case 'host':
        return isIpv6(value) ? canonicalIpv6(value) : value.toLowerCase();
      // one spelling stored, compared and rendered into BIRD: `fd00:0::/8` is kept as `fd00::/8`
      case 'ipv4-prefix':
      case 'ipv6-prefix':
        return canonicalPrefix(value);
      // UUIDs are compared as strings: an upper-case copy of a session's id names the same session
      case 'uuid':
        return value.toLowerCase();
      default:
        return value;
    }
  }
  // Containers are always copied (an unknown part with the empty schema), so the result owns all of them.
  if (Array.isArray(value)) {
    const items = (s.items as TSchema | undefined) ?? ANY;
    return value.map((v) => canonicalize(items, v));
  }
  if (value && typeof value === 'object') {
    const variants = (s.anyOf ?? s.oneOf) as TSchema[] | undefined;
    if (variants) {
      const match = variants.find((v) => compile(v)(hasDefaults(v) ? structuredClone(value) : value));
      return canonicalize(match ?? ANY, value);
    }
    const props = (s.properties as Record<string, TSchema> | undefined) ?? {};
    const rest = typeof s.additionalProperties === 'object' ? (s.additionalProperties as TSchema) : ANY;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = canonicalize(Object.hasOwn(props, k) ? props[k]! : rest, v);
    return out;
  }
  return value;
}
