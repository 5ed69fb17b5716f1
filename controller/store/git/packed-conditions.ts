/**
 * Status conditions as the parse cache (parse-cache.ts) writes them: each condition as
 * `[<index of its texts>, <lastTransitionTime>]`, its texts (type, status, reason, message) once per file
 * in a table. A session's status file holds three conditions whose texts are the same few across the
 * network: at 100,000 sessions they were 56 of the cache's 127 MB, and parsing them 0.4 s of every start.
 * Unpacked, the conditions of one kind share their strings.
 */
import type { Condition } from '../../../common/schema.ts';

type Texts = [type: string, status: Condition['status'], reason: string, message: string];
type Packed = [texts: number, lastTransitionTime: string];

const FIELDS = new Set(['type', 'status', 'reason', 'message', 'lastTransitionTime']);

/**
 * The object holding a cached status's `conditions`: the status of a session's status file
 * `{uuid, status}`, or a router's status itself.
 */
function holderOf(value: unknown): { conditions?: unknown } | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const status = (value as { status?: unknown }).status;
  if ('uuid' in value && typeof status === 'object' && status !== null) return status;
  return value;
}

/** Whether `c` is a condition with the five fields only, which packs without loss. */
function packable(c: unknown): c is Condition {
  return (
    typeof c === 'object' &&
    c !== null &&
    Object.keys(c).every((k) => FIELDS.has(k)) &&
    typeof (c as Condition).lastTransitionTime === 'string'
  );
}

export class ConditionPacker {
  private readonly index = new Map<string, number>();
  readonly texts: Texts[] = [];

  /** `value` with its conditions packed (a shallow copy; `value` itself is not changed), or `value`. */
  pack(value: unknown): unknown {
    const holder = holderOf(value);
    const conditions = holder?.conditions;
    if (!Array.isArray(conditions) || conditions.length === 0 || !conditions.every(packable)) return value;
    const packed = conditions.map((c): Packed => [this.textsIndex(c), c.lastTransitionTime]);
    const withPacked = { ...holder, conditions: packed };
    return holder === value ? withPacked : { ...(value as object), status: withPacked };
  }

  private textsIndex(c: Condition): number {
    const texts: Texts = [c.type, c.status, c.reason, c.message];
    const key = JSON.stringify(texts);
    let i = this.index.get(key);
    if (i === undefined) {
      i = this.texts.length;
      this.texts.push(texts);
      this.index.set(key, i);
    }
    return i;
  }
}

/** Unpacks in place the conditions of a value ConditionPacker packed, with the file's table of texts. */
export function unpackConditions(value: unknown, texts: readonly Texts[]): void {
  const holder = holderOf(value);
  const conditions = holder?.conditions;
  if (!Array.isArray(conditions)) return;
  for (const [i, c] of conditions.entries()) {
    if (!Array.isArray(c)) continue;
    const [index, lastTransitionTime] = c as Packed;
    const t = texts[index];
    if (!t) throw new Error(`condition texts ${index} missing from the table`);
    conditions[i] = { type: t[0], status: t[1], reason: t[2], message: t[3], lastTransitionTime };
  }
}
