/**
 * Answers the controller keeps encoded (users' session lists): built once per revision of the change-feed
 * topics they are made of, gzipped once for the clients that take it; and content negotiation (also of
 * the agents' session lists).
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

export interface EncodedAnswer {
  revision: number;
  /** The JSON body. */
  body: Buffer;
  /** The body gzipped, made when it is asked for again: a quarter of the bytes or less. */
  gzip?: Buffer;
  /** Whether it was sent once already. */
  sent?: boolean;
}

/** Encoded answers by key, rebuilt when their revision moved; beyond `limit` the least recent is dropped. */
export class EncodedAnswers {
  private readonly answers = new Map<string, EncodedAnswer>();
  private readonly limit: number;

  constructor(limit = Infinity) {
    this.limit = limit;
  }

  get(key: string, revision: number, build: () => unknown): EncodedAnswer {
    const cached = this.answers.get(key);
    this.answers.delete(key); // re-inserted last: the Map's order is the recency
    const answer =
      cached?.revision === revision ? cached : { revision, body: Buffer.from(JSON.stringify(build())) };
    this.answers.set(key, answer);
    if (this.answers.size > this.limit) this.answers.delete(this.answers.keys().next().value as string);
    return answer;
  }
}

/**
 * Sends an encoded answer as JSON, gzipped when the client takes it and the answer is sent a second time:
 * compressing costs two to five times what encoding did, which pays only for an answer sent again (a
 * list asked for once between two changes is not worth it).
 * zlib's fastest level: the keys and addresses that make up most of these answers do not compress
 * further at higher levels.
 */
export function sendEncoded(
  reply: FastifyReply,
  accept: string | undefined,
  answer: EncodedAnswer,
): FastifyReply {
  reply.type('application/json; charset=utf-8').header('vary', 'accept-encoding');
  const reused = answer.sent === true;
  answer.sent = true;
  if (!acceptsGzip(accept) || (!reused && !answer.gzip)) return reply.send(answer.body);
  answer.gzip ??= gzipSync(answer.body, { level: 1 });
  return reply.header('content-encoding', 'gzip').send(answer.gzip);
}
