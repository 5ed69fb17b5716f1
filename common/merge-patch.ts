/**
 * JSON Merge Patch (RFC 7386): a patch object names the fields to change. A field given replaces the
 * target's, an object merges into the target's object field by field, `null` removes the field, and an
 * array (or any other value) replaces the field whole. `POST /admin/policy` `patch` uses it, router
 * `update` its one-level form, replaceFields (docs/api.md).
 */
import type { TSchema } from 'typebox';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** `target` with `patch` applied (RFC 7386, section 2). Neither argument is changed. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const result: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    // defineProperty: a key "__proto__" from JSON.parse stays a plain field, never the prototype
    else
      Object.defineProperty(result, key, {
        value: mergePatch(result[key], value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return result;
}

/**
 * A merge patch one level deep (`POST /admin/router` `update`): a field given replaces the target's
 * whole, an object too (where mergePatch would merge into it), and `null` removes it.
 */
export function replaceFields(target: unknown, patch: Record<string, unknown>): unknown {
  const removed = Object.fromEntries(Object.keys(patch).map((key) => [key, null]));
  return mergePatch(mergePatch(target, removed), patch);
}

/**
 * The schema of a merge patch of `schema`'s objects: every field optional and nullable (null removes
 * it), objects down to their fields, arrays and scalars as they are (they replace whole), no defaults (a
 * field left out keeps its value). Unknown fields stay refused where `schema` refuses them.
 */
export function mergePatchSchema<T extends TSchema>(schema: T): TSchema {
  return nullablePatch(schema as unknown as Record<string, Json>, false);
}

function nullablePatch(node: Record<string, Json>, nullable: boolean): Record<string, Json> {
  const copy: Record<string, Json> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === 'default' || key === 'required') continue;
    copy[key] = value;
  }
  if (node.type === 'object' && isObject(node.properties)) {
    const properties: Record<string, Json> = {};
    for (const [key, value] of Object.entries(node.properties))
      properties[key] = nullablePatch(value as Record<string, Json>, true);
    copy.properties = properties;
  }
  if (nullable) {
    if (typeof node.type === 'string') copy.type = [node.type, 'null'];
    if (Array.isArray(node.enum)) copy.enum = [...node.enum, null];
  }
  return copy;
}
