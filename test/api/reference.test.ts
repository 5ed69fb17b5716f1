/**
 * GET /docs, the API reference page (HTTP level; a browser renders it in the e2e tests): the page and
 * Redoc's bundle come from the controller itself, under both prefixes, with a Content-Security-Policy
 * that names no other host.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectOk, startHarness, type Harness } from './helpers.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => h?.close());

describe('GET /docs', () => {
  it.each(['', '/api/v1'])(
    '%s/docs serves the page, its script and the document it reads',
    async (prefix) => {
      const page = await expectOk(h.get(`${prefix}/docs`));
      expect(page.headers['content-type']).toMatch(/^text\/html/);
      // relative URLs only: nothing is fetched from elsewhere
      expect(page.body).not.toMatch(/(src|href|spec-url)="(https?:)?\/\//);
      const src = /<script src="([^"]+)"/.exec(page.body)?.[1];
      const spec = /spec-url="([^"]+)"/.exec(page.body)?.[1];
      expect(src).toBe('docs/redoc.standalone.js');
      const base = new URL(`http://controller${prefix}/docs`);
      const script = await expectOk(h.get(new URL(src ?? '', base).pathname));
      expect(script.headers['content-type']).toMatch(/^text\/javascript/);
      expect(script.rawPayload.length).toBeGreaterThan(500_000);
      expect(script.body).toMatch(/Redoc/);
      const doc = await expectOk(h.get(new URL(spec ?? '', base).pathname));
      expect(doc.json()).toMatchObject({ openapi: '3.1.0' });
    },
  );

  it('has a Content-Security-Policy that allows only this origin (and what Redoc makes itself)', async () => {
    for (const url of ['/docs', '/docs/redoc.standalone.js']) {
      const res = await expectOk(h.get(url));
      const csp = String(res.headers['content-security-policy']);
      expect(csp, url).toMatch(/default-src 'none'/);
      expect(csp, url).toMatch(/script-src 'self'(;|$)/);
      expect(csp, url).toMatch(/connect-src 'self'/);
      expect(csp, url).not.toMatch(/https?:|\*|unsafe-eval/);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
  });
});
