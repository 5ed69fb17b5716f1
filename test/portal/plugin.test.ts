/**
 * The portal's files as the controller serves them (controller/portal/plugin.ts): built from web/ on
 * the first request, with the Content-Security-Policy, cache headers, gzip and ETag revalidation; the
 * language assets the page script imports (web/i18n/index.ts) alike.
 */
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../api/helpers.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

describe('portal files', () => {
  it('serves the page with a strict CSP and no inline code', async () => {
    const res = await h.get('/');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).not.toContain('unsafe-eval');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['cache-control']).toBe('no-cache');
    // The only script is an external module of this origin; no inline script or style, nothing remote.
    expect(res.body).toMatch(/<script type="module" src="\/assets\/app-[A-Z0-9]+\.js"><\/script>/);
    expect(res.body).not.toMatch(/<script>|<style|style=|https?:\/\//);
  });

  it('serves content-hashed assets cached for a year, gzipped on request', async () => {
    const page = await h.get('/');
    const paths = [...page.body.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(paths.map((p) => p.slice(p.lastIndexOf('.')))).toEqual(['.css', '.js']);
    for (const p of paths) {
      const plain = await h.get(p);
      expect(plain.statusCode).toBe(200);
      expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(plain.headers['content-security-policy']).toBeDefined();
      const gz = await h.get(p, undefined, { 'accept-encoding': 'gzip, br' });
      expect(gz.headers['content-encoding']).toBe('gzip');
      expect(gunzipSync(gz.rawPayload).toString('utf8')).toBe(plain.body);
      expect(plain.body).not.toMatch(/https?:\/\/(?!www\.w3\.org)/);
    }
  });

  it('serves each language the page script imports as an asset like it, under the same CSP', async () => {
    const page = await h.get('/');
    const script = page.body.match(/src="(\/assets\/app-[A-Z0-9]+\.js)"/)![1]!;
    const body = (await h.get(script)).body;
    // a dynamic import() of this origin's file, which script-src 'self' allows; no eval
    const imported = [...body.matchAll(/import\("\.\/([^"]+)"\)/g)].map((m) => m[1]!);
    expect(imported.map((p) => p.replace(/-[A-Z0-9]+\.js$/, ''))).toEqual(['zh-CN']);
    expect(body).not.toMatch(/\beval\(|new Function\(/);
    const plain = await h.get(`/assets/${imported[0]}`);
    expect(plain.statusCode).toBe(200);
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.headers['content-security-policy']).toBe(page.headers['content-security-policy']);
    expect(plain.body).toContain('"login.title":"登录"');
    const gz = await h.get(`/assets/${imported[0]}`, undefined, { 'accept-encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.rawPayload).toString('utf8')).toBe(plain.body);
  });

  it('answers 304 to a revalidation with the same ETag', async () => {
    const first = await h.get('/');
    const again = await h.get('/', undefined, { 'if-none-match': String(first.headers.etag) });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
  });

  it('answers an unknown asset with a problem, not a page', async () => {
    const res = await h.get('/assets/app-NOPE.js');
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect((res.json() as { code: string }).code).toBe('NOT_FOUND');
    const bad = await h.get('/assets/..%2Fpackage.json');
    expect(bad.statusCode).toBeGreaterThanOrEqual(400);
    expect(bad.statusCode).toBeLessThan(500);
  });
});
