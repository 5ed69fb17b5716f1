/**
 * A session's `endpoint` (docs/api.md, the endpoint field): where the router's WireGuard sends the tunnel's packets, so
 * never an address a router cannot reach a peer at. Each of the addresses peers tried is refused at create and
 * at modify, naming the field and the reason; a private address passes once the policy sets
 * allowPrivateEndpoints (and the agent is told so in its bird-config); a session stored while the policy
 * allowed it is flagged in the admin list (the review page's checks) and refused on approval once the
 * policy no longer does; the Kubernetes admission webhook, `peerops validate` and the git store's merge
 * refuse the same.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main as validate } from '../../cli/validate.ts';
import type { BirdConfigResponse } from '../../common/agent-api.ts';
import { GROUP_VERSION } from '../../common/schema.ts';
import { admissionRoutes } from '../../controller/api/admission.ts';
import { installErrorHandling } from '../../controller/api/problem.ts';
import { createGitStore } from '../../controller/store/git/index.ts';
import { admin, routerSpec } from '../store/fixtures.ts';
import { eventually, git, put } from '../store/git-helpers.ts';
import {
  ADMIN_ASN,
  driver,
  expectOk,
  problem,
  sessionFields,
  startHarness,
  type Harness,
} from './helpers.ts';

type FieldErrors = { errors?: { pointer: string; message: string }[] };

let h: Harness;
let d: ReturnType<typeof driver>;
let agentToken: string;
let webhook: FastifyInstance;

const setPolicy = (spec: Record<string, unknown>) =>
  expectOk(h.post('/admin/policy', h.admin, { action: 'set', spec: { dn42Asn: ADMIN_ASN, ...spec } }));

beforeAll(async () => {
  h = await startHarness();
  agentToken = await h.addRouter('fra1');
  d = driver(h, 'fra1', agentToken);
  await setPolicy({});
  webhook = Fastify();
  installErrorHandling(webhook);
  await webhook.register(admissionRoutes, { store: h.store });
});
afterAll(async () => {
  await webhook?.close();
  await h?.close();
});

/** The examples, each with the reason the answer gives. */
const EXAMPLES: [string, string][] = [
  ['127.0.0.1:22', 'is a loopback address (127.0.0.0/8)'],
  ['[::1]:53', 'is the loopback address (::1/128)'],
  ['169.254.169.254:80', 'is a link-local address (169.254.0.0/16)'],
  ['0.0.0.0:1', 'is the unspecified address (0.0.0.0/32)'],
  ['255.255.255.255:1', 'is the broadcast address (255.255.255.255/32)'],
  [
    '10.0.0.1:51820',
    'is a private address (10.0.0.0/8), which only a routing policy with allowPrivateEndpoints allows',
  ],
];

describe('endpoint at create and modify', () => {
  it.each(EXAMPLES)('create with %s is refused: /endpoint %s', async (endpoint, reason) => {
    const res = await h.post('/session', d.freshUser(), sessionFields('fra1', { endpoint }));
    expect(problem(res)).toMatchObject({
      status: 400,
      code: 'INVALID_REQUEST',
      detail: `/endpoint: ${reason}`,
    });
    expect((res.json() as FieldErrors).errors).toMatchObject([{ pointer: '/endpoint', message: reason }]);
  });

  it('refuses a name for this machine, and takes a public address or any other name', async () => {
    const res = await h.post(
      '/session',
      d.freshUser(),
      sessionFields('fra1', { endpoint: 'localhost:51820' }),
    );
    expect((res.json() as FieldErrors).errors).toMatchObject([
      { pointer: '/endpoint', message: 'names this machine (localhost, a loopback name)' },
    ]);
    await expectOk(
      h.post('/session', d.freshUser(), sessionFields('fra1', { endpoint: '[2a01:4f8::1]:51820' })),
    );
    await expectOk(h.post('/session', d.freshUser(), sessionFields('fra1', { endpoint: '8.8.8.8:51820' })));
  });

  it.each(EXAMPLES)('modify to %s is refused and leaves the session as it was', async (endpoint, reason) => {
    const uuid = await d.inStatus(1);
    const before = h.store.getSession(uuid);
    const res = await d.user('modify', uuid, { endpoint });
    expect(problem(res)).toMatchObject({
      status: 400,
      code: 'INVALID_REQUEST',
      detail: `/endpoint: ${reason}`,
    });
    expect((res.json() as FieldErrors).errors).toMatchObject([{ pointer: '/endpoint', message: reason }]);
    expect(h.store.getSession(uuid)).toEqual(before);
  });

  it('modify to a reachable endpoint or none still works', async () => {
    const uuid = await d.inStatus(1);
    await expectOk(d.user('modify', uuid, { endpoint: '[2a01:4f8::2]:51820' }));
    await expectOk(d.user('modify', uuid, { endpoint: null }));
  });
});

describe('allowPrivateEndpoints', () => {
  it('lets 10.0.0.1:51820 through and tells the agent; the loopback stays refused', async () => {
    await setPolicy({ allowPrivateEndpoints: true });
    try {
      const uuid = await d.create(d.freshUser(), { endpoint: '10.0.0.1:51820' });
      expect(h.store.getSession(uuid)?.spec.endpoint).toBe('10.0.0.1:51820');
      await expectOk(d.user('modify', uuid, { endpoint: '[fd00:42::7]:51820' }));
      const res = await h.post(
        '/session',
        d.freshUser(),
        sessionFields('fra1', { endpoint: '127.0.0.1:22' }),
      );
      expect(problem(res).detail).toBe('/endpoint: is a loopback address (127.0.0.0/8)');
      const bird = (
        await expectOk(h.get('/agent/fra1/bird-config', agentToken))
      ).json() as BirdConfigResponse;
      expect(bird.allowPrivateEndpoints).toBe(true);
    } finally {
      await setPolicy({});
    }
    const bird = (await expectOk(h.get('/agent/fra1/bird-config', agentToken))).json() as BirdConfigResponse;
    expect(bird).not.toHaveProperty('allowPrivateEndpoints');
  });

  it('a session stored while it was allowed no longer passes the checks once the policy drops it', async () => {
    const reason = EXAMPLES[5]![1];
    await setPolicy({ allowPrivateEndpoints: true });
    let uuid: string;
    try {
      uuid = await d.create(d.freshUser(), { endpoint: '10.0.0.1:51820' });
    } finally {
      await setPolicy({});
    }
    // the review page shows the admin list's policyViolations as its checks (web/pages/admin.tsx)
    const list = (
      await expectOk(h.post('/admin/session', h.admin, { action: 'list', router: 'fra1' }))
    ).json() as {
      sessions: { uuid: string; policyViolations: unknown[] }[];
    };
    expect(list.sessions.find((s) => s.uuid === uuid)?.policyViolations).toMatchObject([
      { pointer: '/endpoint', message: reason },
    ]);
    const res = await d.admin('approve', uuid);
    expect(problem(res)).toMatchObject({ status: 409, code: 'INVALID_STATE' });
    expect((res.json() as FieldErrors).errors).toMatchObject([{ pointer: '/endpoint', message: reason }]);
    expect(d.status(uuid)).toBe(3);
  });
});

describe('the admission webhook', () => {
  it.each(EXAMPLES)(
    'refuses a PeeringSession with endpoint %s: spec.endpoint %s',
    async (endpoint, reason) => {
      const asn = 4242426000 + EXAMPLES.findIndex(([e]) => e === endpoint);
      const object = {
        metadata: { name: `as${asn}-fra1` },
        spec: {
          ...sessionFields('fra1', { asn, action: undefined, endpoint }),
          uuid: randomUUID(),
          listenPort: 36000 + (asn % 1000),
          createdAt: new Date().toISOString(),
        },
      };
      const review = {
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: randomUUID(),
          kind: { group: 'peerops.dev', version: 'v1alpha1', kind: 'PeeringSession' },
          operation: 'CREATE',
          object,
          oldObject: null,
        },
      };
      const res = await webhook.inject({ method: 'POST', url: '/validate', payload: review });
      const answer = res.json() as {
        response: { allowed: boolean; status: { details: { causes: unknown[] } } };
      };
      expect(answer.response.allowed).toBe(false);
      expect(answer.response.status.details.causes).toEqual([
        { type: 'FieldValueInvalid', field: 'spec.endpoint', message: reason },
      ]);
    },
  );
});

describe('a merged pull request', () => {
  it('`peerops validate` names the endpoint, and the git store skips the merged manifest', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'peerops-endpoint-merge-'));
    const bare = join(dir, 'store.git');
    const store = createGitStore({ dir: bare, logger: pino({ level: 'silent' }), pollIntervalMs: 100 });
    await store.start();
    try {
      await store.createRouter('fra1', routerSpec(1), admin);
      await store.putPolicy('default', { dn42Asn: ADMIN_ASN }, admin);
      const work = join(dir, 'work');
      await git(dir, 'clone', '-q', bare, work);
      await put(work, 'sessions/fra1/as4242427001.yaml', {
        apiVersion: GROUP_VERSION,
        kind: 'PeeringSession',
        metadata: { name: 'as4242427001-fra1' },
        spec: {
          ...sessionFields('fra1', { asn: 4242427001, action: undefined }),
          endpoint: '169.254.169.254:80',
        },
      });

      const out: string[] = [];
      const log = vi
        .spyOn(console, 'log')
        .mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
      const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
      let code: number;
      try {
        code = await validate([work]);
      } finally {
        log.mockRestore();
        error.mockRestore();
      }
      expect(code).toBe(1);
      expect(out).toContain(
        'sessions/fra1/as4242427001.yaml: /spec/endpoint: is a link-local address (169.254.0.0/16)',
      );

      await git(work, 'add', '.');
      await git(work, 'commit', '-q', '-m', 'Merge pull request #40');
      await git(work, 'push', '-q', 'origin', 'HEAD');
      await eventually(() => store.storage.rejectedManifests().length === 1);
      expect(store.storage.rejectedManifests()).toEqual(['sessions/fra1/as4242427001.yaml']);
      expect(store.listSessions()).toEqual([]);
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
