/**
 * Answers the controller keeps encoded (agents' and users' session lists): built once per revision of the
 * change-feed topics they are made of, gzipped once for the clients that take it, with their ETag where
 * they have one; and content negotiation.
 */
import { gzipSync } from 'node:zlib';
import { Negotiator } from '@fastify/accept-negotiator';
import type { FastifyReply } from 'fastify';

/** Agents (Node's fetch) send `Accept-Encoding: gzip, deflate`; q-values and `*` are honoured. */
const encodings = new Negotiator({ supportedValues: ['gzip', 'identity'] });

/** Whether the client takes gzip (`Accept-Encoding`). */
export function acceptsGzip(accept: string | undefined): boolean {
  return accept !== undefined && encodings.negotiate(accept) === 'gzip';
}

/**
 * Whether `If-None-Match` names the (strong) `etag`: it may list several tags, weak ones or `*`. An answer
 * without an ETag matches none.
 */
export function etagMatches(header: string | undefined, etag: string | undefined): boolean {
  if (!header || etag === undefined) return false;
  return header.split(',').some((t) => {
    const tag = t.trim().replace(/^W\//, '');
    return tag === etag || tag === '*';
  });
}

export interface EncodedAnswer {
  revision: number;
  /** The JSON body. */
  body: Buffer;
  /** The strong ETag of the body (quoted), for answers that have one. */
  etag?: string;
  /** The body gzipped: a quarter of the bytes or less. */
  gzip?: Buffer;
  /** Whether it was sent once already. */
  sent?: boolean;
}

/** An answer's JSON and, for answers that carry one, its ETag (quoted). */
export interface Encoding {
  json: string;
  etag?: string;
}

export interface EncodedAnswersOptions<T> {
  /**
   * When to gzip: `repeat` (the default) when an answer is sent a second time, since compressing costs two
   * to five times what encoding did and pays only for an answer sent again; `eager` as it is built, for
   * answers that are sent, as a rule, more than once per revision.
   */
  gzip?: 'repeat' | 'eager';
  /** The answer's JSON (and ETag) from what `build` made; JSON.stringify when not given. */
  encode?: (value: T) => Encoding;
}

/**
 * zlib's fastest level: the keys and addresses that make up most answers do not compress further at higher
 * levels.
 */
const gzip = (body: Buffer): Buffer => gzipSync(body, { level: 1 });

/** Encoded answers by key, rebuilt when their revision moved; beyond `limit` the least recent is dropped. */
export class EncodedAnswers<T = unknown> {
  private readonly answers = new Map<string, EncodedAnswer>();
  private readonly limit: number;
  private readonly eager: boolean;
  private readonly encode: (value: T) => Encoding;

  constructor(limit = Infinity, options: EncodedAnswersOptions<T> = {}) {
    this.limit = limit;
    this.eager = options.gzip === 'eager';
    this.encode = options.encode ?? ((value) => ({ json: JSON.stringify(value) }));
  }

  get(key: string, revision: number, build: () => T): EncodedAnswer {
    const cached = this.answers.get(key);
    this.answers.delete(key); // re-inserted last: the Map's order is the recency
    const answer = cached?.revision === revision ? cached : this.made(revision, build());
    this.answers.set(key, answer);
    if (this.answers.size > this.limit) this.answers.delete(this.answers.keys().next().value as string);
    return answer;
  }

  private made(revision: number, value: T): EncodedAnswer {
    const { json, etag } = this.encode(value);
    const body = Buffer.from(json);
    return {
      revision,
      body,
      ...(etag !== undefined ? { etag } : {}),
      ...(this.eager ? { gzip: gzip(body) } : {}),
    };
  }
}

/** Whether `answer` goes out gzipped: when the client takes it and the answer has (or earns) its gzip. */
function sendsGzip(accept: string | undefined, answer: EncodedAnswer): boolean {
  return acceptsGzip(accept) && (answer.gzip !== undefined || answer.sent === true);
}

/**
 * Sends an encoded answer as JSON, gzipped per its cache's rule when the client takes it. An answer with
 * an ETag carries it (weak on the gzipped bytes: another representation of the same content, as RFC 9110
 * asks; If-None-Match compares weakly, so either form matches either) and is answered 304 Not Modified
 * when `ifNoneMatch` names it.
 */
export function sendEncoded(
  reply: FastifyReply,
  accept: string | undefined,
  answer: EncodedAnswer,
  ifNoneMatch?: string,
): FastifyReply {
  const gzipped = sendsGzip(accept, answer);
  if (answer.etag !== undefined) {
    reply
      .header('etag', gzipped ? `W/${answer.etag}` : answer.etag)
      .header('cache-control', 'no-cache')
      .header('vary', 'accept-encoding');
    if (etagMatches(ifNoneMatch, answer.etag)) return reply.code(304).send();
  }
  reply.type('application/json; charset=utf-8').header('vary', 'accept-encoding');
  answer.sent = true;
  if (!gzipped) return reply.send(answer.body);
  answer.gzip ??= gzip(answer.body);
  return reply.header('content-encoding', 'gzip').send(answer.gzip);
}
