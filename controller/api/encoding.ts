/** Content negotiation of the answers the controller keeps encoded (agent session lists, users' lists). */
import { Negotiator } from '@fastify/accept-negotiator';

/** Agents (Node's fetch) send `Accept-Encoding: gzip, deflate`; q-values and `*` are honoured. */
const encodings = new Negotiator({ supportedValues: ['gzip', 'identity'] });

/** Whether the client takes gzip (`Accept-Encoding`). */
export function acceptsGzip(accept: string | undefined): boolean {
  return accept !== undefined && encodings.negotiate(accept) === 'gzip';
}
