/**
 * The web portal (docs/user-guide.md, "The web portal"): `GET /` is the page and `GET /assets/<file>` its
 * script and stylesheet, from the same origin as the API the page calls. Every answer carries a strict
 * Content-Security-Policy: scripts and styles only from this origin (no inline code, no eval), requests
 * only to this origin, no frames, no plugins. The assets are named by their content hash and cached for a
 * year; the page itself is revalidated (ETag) on each load so a new release is picked up at once.
 * Not rate limited: the files are static and come from memory; the page's API calls are counted as any.
 */
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import Type from 'typebox';
import { loadPortalFiles, type PortalFile } from './assets.ts';
import { problem } from '../../common/messages.ts';

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

interface ServedFile {
  contentType: string;
  body: Buffer;
  gzipped: Buffer;
  etag: string;
  cacheControl: string;
}

function served(file: PortalFile): ServedFile {
  const body = Buffer.from(file.body, 'utf8');
  return {
    contentType: file.contentType,
    body,
    gzipped: gzipSync(body, { level: 9 }),
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
    cacheControl: file.path.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
  };
}

export interface PortalOptions {
  /** The files to serve; default loadPortalFiles() (tests and the benchmark pass their own). */
  files?: () => Promise<PortalFile[]>;
}

/**
 * The portal is not part of the REST API: its routes carry no operationId, so /openapi.json
 * (controller/api/openapi.ts) leaves them out; the asset name is still checked by its schema.
 */
const PAGE_SCHEMA: FastifySchema = {};
const ASSET_SCHEMA: FastifySchema = {
  params: Type.Object({ file: Type.String({ pattern: '^[A-Za-z0-9._-]{1,100}$' }) }),
};

export default async function portalPlugin(app: FastifyInstance, opts: PortalOptions): Promise<void> {
  const load = opts.files ?? loadPortalFiles;
  // Built once, on the first request that needs them; a failed build is tried again on the next.
  let files: Promise<Map<string, ServedFile>> | undefined;
  const portalFiles = () =>
    (files ??= load()
      .then((list) => new Map(list.map((f) => [f.path, served(f)])))
      .catch((err: unknown) => {
        files = undefined;
        throw err;
      }));

  async function send(request: FastifyRequest, reply: FastifyReply, path: string) {
    const file = (await portalFiles()).get(path);
    if (!file) throw problem('portal.fileNotFound', { path });
    reply.headers({
      ...SECURITY_HEADERS,
      'content-type': file.contentType,
      'cache-control': file.cacheControl,
      etag: file.etag,
      vary: 'accept-encoding',
    });
    if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
    if (/\bgzip\b/.test(String(request.headers['accept-encoding'] ?? '')))
      return reply.header('content-encoding', 'gzip').send(file.gzipped);
    return reply.send(file.body);
  }

  app.get(
    '/',
    {
      config: { rateLimit: false },
      schema: PAGE_SCHEMA,
    },
    (request, reply) => send(request, reply, 'index.html'),
  );
  app.get(
    '/assets/:file',
    {
      config: { rateLimit: false },
      schema: ASSET_SCHEMA,
    },
    (request, reply) => send(request, reply, `assets/${(request.params as { file: string }).file}`),
  );
}
