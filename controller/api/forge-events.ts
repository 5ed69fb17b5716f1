/**
 * `POST /hooks/git`: a forge's push webhook makes the git store look at the forge now instead of at its
 * next interval (docs/gitops.md, "Following a forge"). The body is not read for anything but its
 * signature: whatever the forge says, the store fetches and checks for itself. Signatures: GitHub's
 * `X-Hub-Signature-256: sha256=<hex>`, Gitea's and Forgejo's `X-Gitea-Signature`/`X-Forgejo-Signature`
 * (hex HMAC-SHA256 of the body), GitLab's `X-Gitlab-Token` (the secret itself).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyRequest } from 'fastify';
import Type from 'typebox';
import type { Store } from '../store/store.ts';
import { problem } from '../../common/messages.ts';

const Accepted = Type.Object(
  { ok: Type.Literal(true) },
  { additionalProperties: false, examples: [{ ok: true }] },
);
/** Documentation only: the body stays bytes (its signature covers them), no schema reads it. */
const PushEvent = Type.Object(
  {},
  {
    additionalProperties: true,
    description: "The forge's push event; only its signature is checked",
    examples: [{ ref: 'refs/heads/main' }],
  },
);

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Does the request carry a valid signature (or token) for `secret`? */
export function signedBy(request: FastifyRequest, body: Buffer, secret: string): boolean {
  const hmac = createHmac('sha256', secret).update(body).digest('hex');
  const github = header(request, 'x-hub-signature-256');
  if (github !== undefined) return sameText(github.toLowerCase(), `sha256=${hmac}`);
  const gitea = header(request, 'x-gitea-signature') ?? header(request, 'x-forgejo-signature');
  if (gitea !== undefined) return sameText(gitea.toLowerCase(), hmac);
  const gitlab = header(request, 'x-gitlab-token');
  if (gitlab !== undefined) return sameText(gitlab, secret);
  return false;
}

export const forgeEventRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  secret: string | undefined;
}> = async (app, opts) => {
  // The signature covers the body's bytes: keep them as they came (this plugin's scope only).
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) =>
    done(null, body),
  );
  app.post(
    '/hooks/git',
    {
      onRequest: [app.identify, app.rateLimit],
      schema: {
        operationId: 'gitPushHook',
        summary: "A forge's push webhook: fetch the followed repository now (signed with the shared secret)",
        body: PushEvent,
        response: { 200: Accepted },
      },
      validatorCompiler: () => (body: unknown) => ({ value: body }),
    },
    async (request) => {
      const { store, secret } = opts;
      if (secret === undefined || store.syncNow === undefined) throw problem('forge.noWebhook');
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      if (!signedBy(request, body, secret)) throw problem('forge.badSignature');
      store.syncNow();
      return { ok: true as const };
    },
  );
};
