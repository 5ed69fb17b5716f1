/** JSON Merge Patch: the examples of RFC 7386 Appendix A, and the patch schema of the policy. */
import { describe, expect, it } from 'vitest';
import { mergePatch, mergePatchSchema, replaceFields } from '../../common/merge-patch.ts';
import { PolicySpec } from '../../common/schema.ts';
import { validate } from '../../common/validate.ts';

describe('mergePatch (RFC 7386)', () => {
  // Appendix A, row by row: original, patch, result
  const cases: [unknown, unknown, unknown][] = [
    [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
    [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
    [{ a: 'b' }, { a: null }, {}],
    [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
    [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
    [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
    [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
    [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
    [
      ['a', 'b'],
      ['c', 'd'],
      ['c', 'd'],
    ],
    [{ a: 'b' }, ['c'], ['c']],
    [{ a: 'foo' }, null, null],
    [{ a: 'foo' }, 'bar', 'bar'],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: 'b', c: null }, { a: 'b' }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
  ];
  for (const [original, patch, result] of cases)
    it(`${JSON.stringify(original)} + ${JSON.stringify(patch)} → ${JSON.stringify(result)}`, () => {
      const before = structuredClone(original);
      expect(mergePatch(original, patch)).toEqual(result);
      expect(original).toEqual(before);
    });

  it('a "__proto__" key from JSON stays a plain field', () => {
    const merged = mergePatch({}, JSON.parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(Object.hasOwn(merged, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('replaceFields (a merge patch one level deep: router update)', () => {
  it('replaces a field whole, an object too, and removes a field given null', () => {
    const stored = { name: 'a', loopback: { ipv4: '172.20.0.1', ipv6: 'fd00::1' }, location: 'x', keep: 1 };
    expect(replaceFields(stored, { loopback: { ipv6: 'fd00::2' }, location: null })).toEqual({
      name: 'a',
      loopback: { ipv6: 'fd00::2' },
      keep: 1,
    });
    expect(stored.location).toBe('x');
  });
});

describe('mergePatchSchema(PolicySpec)', () => {
  const schema = mergePatchSchema(PolicySpec);
  it('takes null for any field, down to nested ones, and no defaults fill in', () => {
    const patch = {
      dn42Asn: null,
      communities: { enabled: null, bandwidth: 24 },
      autoUpdate: { channel: null },
    };
    const checked = validate(schema, patch);
    expect(checked).toEqual({ ok: true, value: patch });
    expect(validate(schema, {})).toEqual({ ok: true, value: {} });
  });
  it('still checks what is given, refuses unknown fields and null inside arrays', () => {
    const bad = validate(schema, {
      dn42Asn: 'x',
      communities: { bogus: 1 },
      blockedAsns: [null],
      autoUpdate: { channel: 'nightly' },
    });
    expect(bad.ok).toBe(false);
    const pointers = bad.ok ? [] : bad.errors.map((e) => e.pointer);
    expect(pointers).toEqual(
      expect.arrayContaining(['/dn42Asn', '/communities/bogus', '/blockedAsns/0', '/autoUpdate/channel']),
    );
    expect(validate(schema, { nope: 1 }).ok).toBe(false);
  });
});
