/**
 * The admission webhook's review at the HTTP level, on the git store (the review reads only the Store
 * interface; test/k8s/admission.test.ts has a real kube-apiserver call it on the Kubernetes store): what
 * it answers for each kind and operation, and a malformed AdmissionReview.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admissionRoutes } from '../../controller/api/admission.ts';
import { installErrorHandling } from '../../controller/api/problem.ts';
import { ADMIN_ASN, sessionFields, startHarness, type Harness } from './helpers.ts';

let h: Harness;
let webhook: FastifyInstance;

beforeAll(async () => {
  h = await startHarness();
  await h.addRouter('fra1');
  webhook = Fastify();
  installErrorHandling(webhook);
  await webhook.register(admissionRoutes, { store: h.store });
});
afterAll(async () => {
  await webhook.close();
  await h.close();
});

function reviewOf(kind: string, operation: string, object: unknown, oldObject: unknown = null) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: { group: 'peerops.dev', version: 'v1alpha1', kind },
      operation,
      object,
      oldObject,
    },
  };
}

async function ask(body: unknown) {
  const res = await webhook.inject({ method: 'POST', url: '/validate', payload: body as object });
  return { status: res.statusCode, body: res.json() };
}

/** A stored session object: the REST create body without its action, and what the store allocates. */
const session = (asn: number, extra: Record<string, unknown> = {}) => ({
  metadata: { name: `as${asn}-fra1` },
  spec: {
    ...sessionFields('fra1', { asn, action: undefined }),
    uuid: randomUUID(),
    listenPort: 30000 + (asn % 1000),
    createdAt: new Date().toISOString(),
    ...extra,
  },
});

describe('POST /validate', () => {
  it('allows a valid session and answers with the review uid', async () => {
    const review = reviewOf('PeeringSession', 'CREATE', session(4242420001));
    const answer = await ask(review);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: review.request.uid, allowed: true },
    });
  });

  it('refuses with 422 Invalid and one cause per field', async () => {
    const answer = await ask(
      reviewOf('PeeringSession', 'CREATE', session(4242420002, { router: 'nowhere', mtu: 100 })),
    );
    expect(answer.body.response.allowed).toBe(false);
    expect(answer.body.response.status).toMatchObject({ code: 422, reason: 'Invalid' });
    expect(answer.body.response.status.details.causes).toEqual([
      { type: 'FieldValueInvalid', field: 'spec.mtu', message: 'must be 1280 or more' },
    ]);
  });

  it('lets deletes through, and kinds it does not judge', async () => {
    const del = await ask(reviewOf('PeeringSession', 'DELETE', null, session(4242420003)));
    expect(del.body.response.allowed).toBe(true);
    const other = await ask(reviewOf('ConfigMap', 'CREATE', { metadata: { name: 'x' }, spec: null }));
    expect(other.body.response.allowed).toBe(true);
  });

  it('warns, without refusing, about a default policy without dn42Asn', async () => {
    const answer = await ask(
      reviewOf('RoutingPolicy', 'CREATE', {
        metadata: { name: 'default' },
        spec: { blockedAsns: [ADMIN_ASN + 1] },
      }),
    );
    expect(answer.body.response).toMatchObject({ allowed: true });
    expect(answer.body.response.warnings).toEqual([
      "/spec/dn42Asn: the default policy must set dn42Asn (the network's own ASN)",
    ]);
  });

  it('answers a malformed review with 400 and the field, never 5xx', async () => {
    for (const body of [
      {},
      { ...reviewOf('Router', 'CREATE', null), apiVersion: 'admission.k8s.io/v1beta1' },
      reviewOf('Router', 'CREATE', { metadata: {}, spec: {} }),
      [],
    ]) {
      const answer = await ask(body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.code).toBe('INVALID_REQUEST');
      expect(answer.body.errors?.[0]?.pointer ?? answer.body.detail).toBeTruthy();
    }
  });
});
