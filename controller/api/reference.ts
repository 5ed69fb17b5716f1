/**
 * `GET /docs`: the API reference page, Redoc's standalone bundle (the npm package `redoc`) rendering
 * /openapi.json. Everything is served from this controller, nothing from a CDN, and the page's
 * Content-Security-Policy allows only what Redoc needs: its script from here, inline styles (its CSS is
 * made at run time), the search worker it starts from a blob, images from data: URLs. (Redoc's sidebar
 * shows a logo from its CDN; the policy blocks it and Redoc then leaves it out.)
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { problem } from '../../common/messages.ts';

export const REDOC_BUNDLE = 'redoc/bundles/redoc.standalone.js';

export const REFERENCE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  'worker-src blob:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Relative URLs: the page works under /docs and /api/v1/docs alike. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>peerops controller API</title>
</head>
<body>
<redoc spec-url="openapi.json"></redoc>
<script src="docs/redoc.standalone.js"></script>
</body>
</html>
`;

const Html = Type.String({ description: 'The reference page', examples: ['<!doctype html>…'] });
const Script = Type.Unsafe<Buffer>({
  type: 'string',
  description: "Redoc's standalone bundle",
  examples: ['/*! For license information … */'],
});

/** Baked into release bundles by scripts/build-release.ts; a source checkout reads node_modules. */
declare const __PEEROPS_REDOC_BUNDLE__: string | undefined;

/** The bundle, read once; a build without it answers 404. */
let bundle: Promise<Buffer> | undefined;
function redocBundle(): Promise<Buffer> {
  const baked = typeof __PEEROPS_REDOC_BUNDLE__ === 'string' ? __PEEROPS_REDOC_BUNDLE__ : undefined;
  bundle ??= (
    baked !== undefined
      ? Promise.resolve(Buffer.from(baked))
      : readFile(createRequire(import.meta.url).resolve(REDOC_BUNDLE))
  ).catch((err: unknown) => {
    bundle = undefined;
    throw problem('reference.missing', { reason: String(err).slice(0, 120) });
  });
  return bundle;
}

export const referenceRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const headers = { 'content-security-policy': REFERENCE_CSP, 'x-content-type-options': 'nosniff' };
  app.get(
    '/docs',
    {
      onRequest: [app.identify, app.rateLimit],
      schema: {
        operationId: 'reference',
        summary: 'This API reference as a web page (Redoc, served from this controller)',
        response: { 200: { content: { 'text/html': { schema: Html } } } },
      },
    },
    async (_request, reply) => reply.headers(headers).type('text/html; charset=utf-8').send(PAGE),
  );
  app.get(
    '/docs/redoc.standalone.js',
    {
      onRequest: [app.identify, app.rateLimit],
      schema: {
        operationId: 'referenceScript',
        summary: "The reference page's script (Redoc's standalone bundle)",
        response: { 200: { content: { 'text/javascript': { schema: Script } } } },
      },
    },
    async (_request, reply) =>
      reply
        .headers({ ...headers, 'cache-control': 'public, max-age=86400' })
        .type('text/javascript; charset=utf-8')
        .send(await redocBundle()),
  );
};
