/**
 * Revoking user and admin tokens (docs/login.md, Revoking tokens; docs/api.md, Tokens): `POST /token`
 * revokes the caller's own token (the portal's and the CLI's logout; the portal's sign-in cookies are
 * cleared with it) or says whose it is (`current`: the portal after a reload), `POST /admin/token` revokes any token
 * by its id, every token of an ASN at once, and lists what is revoked. The store keeps the list (durable,
 * shared by every replica, forgotten as tokens expire); auth.ts checks every request against it.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { Asn, Timestamp } from '../../common/schema.ts';
import { parseTokenId } from '../auth/token-id.ts';
import type { PortalSessions } from '../auth/portal-session.ts';
import type { RevocationList } from '../store/core/revocations.ts';
import type { Store } from '../store/store.ts';
import { actorOf } from './actions.ts';
import { caller, requireAdmin, requireToken } from './auth.ts';
import { Actions } from './schemas.ts';
import { problem } from '../../common/messages.ts';

const EXAMPLE_ID = '4242421234.1795000000.q8Xv2LmK0pR7sT1w';
/** A token id as `peerops admin token` prints it (token-id.ts); the store checks its parts. */
const TokenIdField = Type.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[0-9]+\\.[0-9]+\\.[A-Za-z0-9_-]+$',
});

const OwnRevoke = Type.Object(
  { action: Type.Literal('revoke') },
  { additionalProperties: false, examples: [{ action: 'revoke' }] },
);
const OwnCurrent = Type.Object(
  { action: Type.Literal('current') },
  { additionalProperties: false, examples: [{ action: 'current' }] },
);
const AdminRevoke = Type.Object(
  { action: Type.Literal('revoke'), id: TokenIdField },
  { additionalProperties: false, examples: [{ action: 'revoke', id: EXAMPLE_ID }] },
);
const AdminRevokeAsn = Type.Object(
  { action: Type.Literal('revoke-asn'), asn: Asn },
  { additionalProperties: false, examples: [{ action: 'revoke-asn', asn: 4242421234 }] },
);
const AdminList = Type.Object(
  { action: Type.Literal('list') },
  { additionalProperties: false, examples: [{ action: 'list' }] },
);

const RevokedToken = Type.Object({ id: Type.String(), asn: Asn, expiresAt: Timestamp });
const RevokedAsn = Type.Object({ asn: Asn, issuedUntil: Timestamp });
const RevokedAnswer = Type.Object({ revoked: RevokedToken });
const RevokedAsnAnswer = Type.Object({ revoked: RevokedAsn });
const CurrentAnswer = Type.Object({
  asn: Asn,
  role: Type.Union([Type.Literal('user'), Type.Literal('admin')]),
  id: Type.String(),
  expiresAt: Timestamp,
});
const ListAnswer = Type.Object({ tokens: Type.Array(RevokedToken), asns: Type.Array(RevokedAsn) });

const iso = (seconds: number) => new Date(seconds * 1000).toISOString();

function revokedToken(id: string) {
  const parsed = parseTokenId(id);
  return { id, asn: parsed?.asn ?? 0, expiresAt: iso(parsed?.expiresAt ?? 0) };
}

function listAnswer(list: RevocationList) {
  return {
    tokens: list.tokens.map(revokedToken),
    asns: Object.entries(list.asns).map(([asn, upTo]) => ({ asn: Number(asn), issuedUntil: iso(upTo) })),
  };
}

export const tokenRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  sessions: Pick<PortalSessions, 'present' | 'end'>;
}> = async (app, opts) => {
  const { store, sessions } = opts;

  app.post(
    '/token',
    {
      // any valid token, of a blocked ASN too: logging out is never refused
      onRequest: [app.identify, app.rateLimit, requireToken],
      schema: {
        operationId: 'token',
        summary: "Revoke the caller's own token (log out), or say whose it is",
        description:
          'revoke: the token of the request is refused from then on, by every replica; answers once the revocation ' +
          "is stored, and clears the portal's sign-in cookies. current: the token's ASN, role (as it is now), id " +
          'and expiry.',
        body: Actions([OwnRevoke, OwnCurrent]),
        response: { 200: Type.Union([RevokedAnswer, CurrentAnswer]) },
      },
    },
    async (request, reply) => {
      const identity = caller(request);
      const claims = request.tokenClaims;
      // identify sets both together: only a route without it gets here without claims
      if (!claims) throw problem('auth.tokenRequired');
      const expiresAt = revokedToken(claims.id).expiresAt;
      if (request.body.action === 'current')
        return { asn: identity.asn, role: identity.role, id: claims.id, expiresAt };
      await store.revokeTokens({ token: claims.id }, actorOf(identity));
      if (sessions.present(request)) sessions.end(request, reply);
      request.log.info({ asn: claims.asn, token: claims.id }, 'token revoked by its holder');
      return { revoked: revokedToken(claims.id) };
    },
  );

  app.post(
    '/admin/token',
    {
      onRequest: [app.identify, app.rateLimit, requireAdmin],
      schema: {
        operationId: 'adminToken',
        summary: 'Revoke any token by its id, or every token of an ASN; list the revocations',
        description:
          'One body per action, chosen by `action`: revoke (`id`, as `peerops admin token` prints it), revoke-asn ' +
          '(every token of `asn` issued until now), list. Answers once the revocation is stored.',
        body: Actions([AdminRevoke, AdminRevokeAsn, AdminList]),
        response: { 200: Type.Union([RevokedAnswer, RevokedAsnAnswer, ListAnswer]) },
      },
    },
    async (request) => {
      const actor = actorOf(caller(request));
      const { body } = request;
      switch (body.action) {
        case 'list':
          return listAnswer(store.listRevocations());
        case 'revoke':
          await store.revokeTokens({ token: body.id }, actor);
          request.log.warn({ actor: actor.name, token: body.id }, 'token revoked');
          return { revoked: revokedToken(body.id) };
        case 'revoke-asn': {
          const list = await store.revokeTokens({ asn: body.asn }, actor);
          request.log.warn({ actor: actor.name, asn: body.asn }, 'every token of an ASN revoked');
          return { revoked: { asn: body.asn, issuedUntil: iso(list.asns[String(body.asn)] ?? 0) } };
        }
      }
    },
  );
};
