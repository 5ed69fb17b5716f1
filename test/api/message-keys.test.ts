/**
 * The controller's words have keys (docs/api.md, Errors, Message keys): a refusal's answer and each field
 * error carry the catalogue key and parameters beside the English sentence, which is the catalogue's;
 * the validator's own wording ("must NOT have fewer than …") never reaches a client.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { englishText, FIELD_MESSAGES, MESSAGE_KEYS, REFUSALS } from '../../common/messages.ts';
import { sessionFields, startHarness, type Harness } from './helpers.ts';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
  await h.addRouter('fra1');
});
afterAll(async () => h?.close());

describe('message keys in answers', () => {
  it('a refusal: key and params beside the English detail, which is the catalogue sentence', async () => {
    const uuid = '0b3a4f6e-1c2d-4e5f-8a9b-0c1d2e3f4a5b';
    const res = await h.post('/session', h.user, { action: 'delete', uuid });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({
      code: 'SESSION_NOT_FOUND',
      key: 'session.notFound',
      params: { uuid },
      detail: `no session ${uuid}`,
    });
    const router = await h.post('/session', h.user, sessionFields('nowhere1'));
    expect(router.json()).toMatchObject({
      code: 'ROUTER_NOT_FOUND',
      key: 'router.notFound',
      params: { name: 'nowhere1' },
      detail: 'no router nowhere1',
    });
  });

  it('field errors: one keyed sentence each, naming the field, no validator wording', async () => {
    const res = await h.post(
      '/session',
      h.user,
      sessionFields('fra1', { publicKey: 'c2hvcnQ=', mtu: 99999, linkLocal: 'fd00::1', colour: 'red' }),
    );
    expect(res.statusCode).toBe(400);
    const body = res.json() as {
      key: string;
      params: Record<string, unknown>;
      detail: string;
      errors: { pointer: string; message: string; key: string; params?: Record<string, unknown> }[];
    };
    const byPointer = Object.fromEntries(body.errors.map((e) => [e.pointer, e]));
    expect(byPointer['/mtu']).toEqual({
      pointer: '/mtu',
      key: 'field.atMost',
      params: { limit: 9000 },
      message: 'must be 9000 or less',
    });
    expect(byPointer['/linkLocal']).toMatchObject({ key: 'field.format.link-local' });
    expect(byPointer['/colour']).toMatchObject({ key: 'field.unknown', message: 'is not a known field' });
    expect(byPointer['/publicKey']?.key).toMatch(/^field\./);
    for (const e of body.errors) {
      expect(MESSAGE_KEYS).toContain(e.key);
      expect(e.message).not.toMatch(/must NOT|must match|must have|must be equal/);
    }
    expect(body.key).toBe('request.invalidField');
    expect(body.detail).toBe(englishText('request.invalidField', body.params as Record<string, string>));
  });

  it("a rule's field error has its key too: an address outside DN42", async () => {
    const res = await h.post('/session', h.user, sessionFields('fra1', { ipv6: '2606:4700::1111' }));
    expect((res.json() as { errors: unknown[] }).errors).toContainEqual({
      pointer: '/ipv6',
      key: 'field.outsideDn42',
      params: { ranges: 'fd00::/8', family: 'ipv6' },
      message: englishText('field.outsideDn42', { ranges: 'fd00::/8', family: 'ipv6' }),
    });
  });

  it('a type error and a missing field read as sentences', async () => {
    const res = await h.post('/session', h.user, {
      ...sessionFields('fra1', { mtu: 'big' }),
      router: undefined,
    });
    const errors = (res.json() as { errors: { pointer: string; key: string; message: string }[] }).errors;
    expect(errors).toContainEqual({ pointer: '/router', key: 'field.required', message: 'is required' });
    expect(errors).toContainEqual({
      pointer: '/mtu',
      key: 'field.notInteger',
      message: 'must be a whole number',
    });
  });

  it('an answer made outside any route (no route) has its key too', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/nowhere' });
    expect(res.json()).toMatchObject({ key: 'route.notFound', params: { method: 'GET', path: '/nowhere' } });
  });

  it('no refusal is made outside the catalogue: every DomainError and ProblemError comes from it', () => {
    // the types require a key of every error (common/errors.ts); this finds a site that would pass one in
    // by hand instead of through fault, problem or ProblemError.of
    const root = path.resolve(import.meta.dirname, '../..');
    const made = /new (?:DomainError|ProblemError)\(/g;
    const sites = ['common', 'controller', 'cli', 'agent', 'bin']
      .flatMap((dir) =>
        readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' }).map((f) => `${dir}/${f}`),
      )
      .filter((f) => /\.tsx?$/.test(f) && f !== 'common/errors.ts' && f !== 'common/messages.ts')
      .flatMap((f) => [...readFileSync(path.join(root, f), 'utf8').matchAll(made)].map(() => f));
    expect(sites).toEqual([]);
  });

  it('the catalogue: every refusal has a code and a sentence; keys are unique across both tables', () => {
    for (const [key, entry] of Object.entries(REFUSALS)) {
      expect(entry.text.trim(), key).not.toBe('');
      expect(Object.hasOwn(FIELD_MESSAGES, key), key).toBe(false);
    }
    expect(new Set(MESSAGE_KEYS).size).toBe(MESSAGE_KEYS.length);
  });
});
