/**
 * `GET /session/events` (docs/api.md, Live updates): the caller's session list as server-sent events, sent
 * again each time the store's change feed says it changed, so the portal and `peerops session list
 * --watch` show a status change as the agent reports it instead of at their next poll. The list is
 * `POST /session` list's answer, byte for byte and scoped the same (a user its ASN's sessions, an admin
 * all). A stream lives as long as its token: it ends with an `end` event once the token expires or is
 * revoked, or the ASN is blocked, since a token is checked at every request and a stream is one long one.
 */
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import type { ProblemError } from '../../common/errors.ts';
import { blockedEverywhere } from '../../common/rules/index.ts';
import type { Identity, TokenClaims } from '../auth/jwt.ts';
import { parseTokenId } from '../auth/token-id.ts';
import { topics, type Topic } from '../store/change-feed.ts';
import type { Store } from '../store/store.ts';
import { caller, requireUser } from './auth.ts';
import type { EncodedAnswer } from './encoding.ts';
import { problem } from '../../common/messages.ts';

/** Streams one ASN may hold open at once (its tabs and terminals); the next is refused RATE_LIMITED. */
export const MAX_STREAMS_PER_ASN = 8;
/** How often a stream checks its token (expiry, revocation, a block) while nothing changes. */
const CHECK_MS = 1000;
/** A comment line this often on a quiet stream, so that proxies and NAT keep the connection. */
const HEARTBEAT_MS = 15_000;

/** The change-feed topics a caller's list is made of (its revision is the largest of theirs). */
export function listTopics(identity: Identity): Topic[] {
  return [
    identity.role === 'admin' ? topics.allSessions : topics.asnSessions(identity.asn),
    topics.routers,
    topics.policies,
  ];
}

/** Open streams by ASN, per store: shared by the API's two prefixes, which register these routes twice. */
const openStreams = new WeakMap<Store, Map<number, number>>();

/**
 * Why the stream must end now, or undefined while its token still holds. `admin`: the caller's role as
 * the request's check decided it (a login's admin token whose ASN left the admin list is a user's).
 */
function tokenEnded(
  store: Store,
  claims: TokenClaims,
  admin: boolean,
  expiresAt: number,
): ProblemError | undefined {
  if (Date.now() >= expiresAt * 1000) return problem('auth.tokenExpired');
  if (store.tokenRevoked(claims.id, claims.asn, claims.issuedAt)) return problem('auth.tokenRevoked');
  if (!admin && blockedEverywhere(store.getPolicy('default')?.spec, claims.asn))
    return problem('events.asnBlocked', { asn: claims.asn });
  return undefined;
}

/** Resolves once any of `watched` moved past `since`, after `timeoutMs`, or when `signal` aborts. */
async function anyChange(
  store: Store,
  watched: Topic[],
  since: number,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<void> {
  const settled = new AbortController();
  const either = AbortSignal.any([signal, settled.signal]);
  await Promise.race(watched.map((topic) => store.waitForChange(topic, since, timeoutMs, either)));
  settled.abort();
}

const EXAMPLE = [
  'retry: 3000',
  '',
  'event: sessions',
  'data: {"sessions":[{"uuid":"86bc88dc-e11b-49d1-84f3-cc3666d9138d","status":1,"statusName":"ACTIVE","bgpState":"Established"}]}',
  '',
  ': keep-alive',
  '',
  'event: end',
  'data: {"code":"INVALID_TOKEN","detail":"the token was revoked; log in again","key":"auth.tokenRevoked","params":{}}',
  '',
  '',
].join('\n');

export const sessionEventRoutes: FastifyPluginAsyncTypebox<{
  store: Store;
  /** The caller's list as `POST /session` list answers it (session.ts). */
  listAnswer: (identity: Identity) => EncodedAnswer;
}> = async (app, opts) => {
  const { store, listAnswer } = opts;
  const counts = openStreams.get(store) ?? new Map<number, number>();
  openStreams.set(store, counts);
  // Ended when the server closes, so that draining does not wait on streams that never end by themselves.
  const streams = new Set<AbortController>();
  app.addHook('preClose', async () => {
    for (const stream of streams) stream.abort();
  });

  app.get(
    '/session/events',
    {
      onRequest: [app.identify, app.rateLimit, requireUser],
      schema: {
        operationId: 'sessionEvents',
        summary: "The caller's session list, sent again at each change (server-sent events)",
        description: `A \`sessions\` event at once and after each change, carrying what \`POST /session\` list answers; a comment line every ${HEARTBEAT_MS / 1000} s when quiet; an \`end\` event (problem code and detail) when the token expires or is revoked. At most ${MAX_STREAMS_PER_ASN} streams per ASN.`,
        response: {
          200: {
            description: 'An event stream',
            content: {
              'text/event-stream': { schema: Type.Unsafe<PassThrough>(Type.String({ examples: [EXAMPLE] })) },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const identity = caller(request);
      const claims = request.tokenClaims;
      if (!claims) throw problem('auth.tokenRequired');
      const open = counts.get(identity.asn) ?? 0;
      if (open >= MAX_STREAMS_PER_ASN)
        throw problem('events.tooManyStreams', { asn: identity.asn, max: MAX_STREAMS_PER_ASN });
      counts.set(identity.asn, open + 1);
      // an id that names no expiry cannot have been issued (token-id.ts): ended at once
      const expiresAt = parseTokenId(claims.id)?.expiresAt ?? 0;
      const watched = listTopics(identity);
      const gone = new AbortController();
      streams.add(gone);
      const out = new PassThrough();
      const stop = () => gone.abort();
      reply.raw.once('close', stop);
      const send = async (chunk: string | Buffer): Promise<void> => {
        // a client that reads slowly holds the next event back; the changes meanwhile make one event
        if (!out.write(chunk)) await once(out, 'drain', { signal: gone.signal });
      };
      const run = async () => {
        await send('retry: 3000\n\n');
        let last: Buffer | undefined;
        let quietSince = Date.now();
        while (!gone.signal.aborted) {
          const ended = tokenEnded(store, claims, identity.role === 'admin', expiresAt);
          if (ended) {
            await send(
              `event: end\ndata: ${JSON.stringify({ code: ended.code, detail: ended.message, ...ended.keyed })}\n\n`,
            );
            return;
          }
          const answer = listAnswer(identity);
          // The same cached answer is the same list, without comparing its bytes each second; a rebuilt
          // one may still be (a change elsewhere in a topic). The JSON has no line breaks: one data line.
          const changed = answer.body !== last && (last === undefined || !answer.body.equals(last));
          last = answer.body;
          if (changed) {
            await send(
              Buffer.concat([Buffer.from('event: sessions\ndata: '), answer.body, Buffer.from('\n\n')]),
            );
            quietSince = Date.now();
          } else if (Date.now() - quietSince >= HEARTBEAT_MS) {
            await send(': keep-alive\n\n');
            quietSince = Date.now();
          }
          await anyChange(store, watched, answer.revision, CHECK_MS, gone.signal);
        }
      };
      run()
        .catch(() => undefined) // aborted while a slow client's socket was full: the stream is gone
        .finally(() => {
          reply.raw.off('close', stop);
          streams.delete(gone);
          const left = (counts.get(identity.asn) ?? 1) - 1;
          if (left > 0) counts.set(identity.asn, left);
          else counts.delete(identity.asn);
          out.end();
        });
      return (
        reply
          .type('text/event-stream; charset=utf-8')
          .header('cache-control', 'no-cache')
          // a reverse proxy (nginx) that buffers answers would hold the events back
          .header('x-accel-buffering', 'no')
          .send(out)
      );
    },
  );
};
