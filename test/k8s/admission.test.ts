/**
 * The admission webhook end to end: a real kube-apiserver calls `peerops serve` (Kubernetes store, webhook
 * on with a certificate from a CA made with openssl) for objects written by a second user, as kubectl,
 * Flux or Argo CD would write them; the controller's user is exempt by a matchConditions expression, as
 * the chart configures it for the controller's ServiceAccount.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { admin, defaultPolicy, newSession, pending, routerSpec } from '../store/fixtures.ts';
import { freePort } from '../support/ports.ts';
import { makeCertificate } from '../support/tls.ts';
import { ADMIN_USER, ROOT, TOOLS_BUILD_TIMEOUT_MS, useApiServer } from './apiserver.ts';

const server = useApiServer();
let dir: string;
let namespace: string;
let store: Store;
let controller: ChildProcess;
let controllerOutput = '';
let webhookPort: number;
let apiBase: string;

interface KubeAnswer {
  status: number;
  body: { message?: string; details?: { causes?: { field: string; message: string }[] } };
  warnings: string[];
}

/** One raw call of the Kubernetes API, as kubectl makes it: the writer's token unless `token` is given. */
function kube(method: string, path: string, body?: unknown, token = server.writerToken): Promise<KubeAnswer> {
  const type = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
  return new Promise((resolve, reject) => {
    const req = request(
      `${server.url}${path}`,
      {
        method,
        // the test API server's own self-signed certificate
        rejectUnauthorized: false,
        headers: { authorization: `Bearer ${token}`, 'content-type': type },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => {
          const warning = res.headers['warning'];
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(text) as KubeAnswer['body'],
            warnings: warning === undefined ? [] : [warning].flat(),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const resources = () => `/apis/peerops.dev/v1alpha1/namespaces/${namespace}`;

function sessionObject(name: string, spec: Record<string, unknown>) {
  return { apiVersion: 'peerops.dev/v1alpha1', kind: 'PeeringSession', metadata: { name }, spec };
}

/** A session spec as a GitOps repository holds it: everything the store would otherwise allocate. */
function appliedSpec(asn: number, router: string, extra: Record<string, unknown> = {}) {
  return { ...newSession(asn, router), uuid: randomUUID(), listenPort: 30000 + (asn % 1000), ...extra };
}

/** Waits until the controller's index holds `sessions` sessions (its active_sessions_total gauges). */
async function controllerSees(sessions: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const text = await fetch(`${apiBase}/metrics`)
      .then((r) => r.text())
      .catch(() => '');
    const counted = [...text.matchAll(/^active_sessions_total\{[^}]*\} (\d+)$/gm)].reduce(
      (sum, m) => sum + Number(m[1]),
      0,
    );
    if (counted === sessions) return;
    if (Date.now() > deadline)
      throw new Error(`the controller did not see ${sessions} sessions:\n${controllerOutput}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `peerops serve` on the test namespace (Kubernetes store) as pod `name`, with `env` added. */
async function serve(name: string, listen: string, env: Record<string, string>): Promise<ChildProcess> {
  return spawn(process.execPath, ['bin/peerops.ts', 'serve', '--listen', listen, '--data', join(dir, name)], {
    cwd: ROOT,
    env: {
      ...process.env,
      PEEROPS_STORE: 'kubernetes',
      PEEROPS_NAMESPACE: namespace,
      KUBECONFIG: await server.kubeconfigFile(),
      POD_NAME: name,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-admission-'));
  namespace = await server.createNamespace('admission');
  store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace });
  await store.start();
  await store.putPolicy('default', defaultPolicy, admin);
  await store.createRouter('fra1', routerSpec(1), admin);
  await store.createSession(newSession(4242420001, 'fra1'), pending, admin, 'first session');

  const caBundle = (await makeCertificate(dir)).toString('base64');
  webhookPort = await freePort();
  const apiPort = await freePort();
  apiBase = `http://127.0.0.1:${apiPort}`;
  controller = await serve('admission-test', `127.0.0.1:${apiPort}`, {
    PEEROPS_WEBHOOK_LISTEN: `127.0.0.1:${webhookPort}`,
    PEEROPS_WEBHOOK_CERT_DIR: dir,
  });
  controller.stdout?.on('data', (b: Buffer) => (controllerOutput += b.toString()));
  controller.stderr?.on('data', (b: Buffer) => (controllerOutput += b.toString()));
  await controllerSees(1);

  const configuration = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: `peerops-${namespace}` },
    webhooks: [
      {
        name: 'validate.peerops.dev',
        admissionReviewVersions: ['v1'],
        sideEffects: 'None',
        failurePolicy: 'Fail',
        timeoutSeconds: 5,
        clientConfig: { url: `https://127.0.0.1:${webhookPort}/validate`, caBundle },
        rules: [
          {
            apiGroups: ['peerops.dev'],
            apiVersions: ['v1alpha1'],
            operations: ['CREATE', 'UPDATE'],
            resources: ['peeringsessions', 'routers', 'routingpolicies'],
            scope: 'Namespaced',
          },
        ],
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
        matchConditions: [
          { name: 'not-the-controller', expression: `request.userInfo.username != '${ADMIN_USER}'` },
        ],
      },
    ],
  };
  const created = await kube(
    'POST',
    '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations',
    configuration,
    server.token,
  );
  expect(created.status).toBe(201);
  // The API server picks the configuration up from its own watch: probe with a router whose nodeId is
  // taken until the webhook refuses it (a probe stored before that is removed again).
  const deadline = Date.now() + 15_000;
  for (;;) {
    const probe = await kube('POST', `${resources()}/routers`, {
      apiVersion: 'peerops.dev/v1alpha1',
      kind: 'Router',
      metadata: { name: 'probe' },
      spec: routerSpec(1),
    });
    if (probe.status === 422) break;
    if (probe.status === 201) await kube('DELETE', `${resources()}/routers/probe`);
    if (Date.now() > deadline) throw new Error(`the webhook never answered: ${JSON.stringify(probe.body)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}, TOOLS_BUILD_TIMEOUT_MS);

afterAll(async () => {
  if (controller && controller.exitCode === null && controller.signalCode === null)
    controller.kill('SIGKILL');
  await store?.close();
  await kube(
    'DELETE',
    `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/peerops-${namespace}`,
    undefined,
    server.token,
  ).catch(() => undefined);
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('the admission webhook', () => {
  it("refuses a session holding another ASN's peer address, naming the field, and stores nothing", async () => {
    const taken = newSession(4242420001, 'fra1').ipv6;
    const answer = await kube(
      'POST',
      `${resources()}/peeringsessions`,
      sessionObject('as4242420002-fra1', appliedSpec(4242420002, 'fra1', { ipv6: taken })),
    );
    expect(answer.status).toBe(422);
    expect(answer.body.message).toBe(
      'admission webhook "validate.peerops.dev" denied the request: spec.ipv6: is the address of AS4242420001\'s session as4242420001-fra1',
    );
    expect(answer.body.details?.causes).toEqual([
      { field: 'spec.ipv6', message: "is the address of AS4242420001's session as4242420001-fra1" },
    ]);
    expect((await kube('GET', `${resources()}/peeringsessions/as4242420002-fra1`)).status).toBe(404);
  });

  it('refuses the other rules that span objects, each with its field', async () => {
    const firstPort = store.listSessions({ asn: 4242420001 })[0]?.spec.listenPort;
    const cases: [string, Record<string, unknown>, string, RegExp][] = [
      ['as4242420003-ams1', appliedSpec(4242420003, 'ams1'), 'spec.router', /unknown router 'ams1'/],
      ['wrong-name', appliedSpec(4242420003, 'fra1'), 'metadata.name', /must be as4242420003-fra1/],
      ['as4242429999-fra1', appliedSpec(4242429999, 'fra1'), 'spec.asn', /is blocked/],
      [
        'as4242420003-fra1',
        appliedSpec(4242420003, 'fra1', { listenPort: firstPort }),
        'spec.listenPort',
        /already used by session as4242420001-fra1/,
      ],
      [
        'as4242420003-fra1',
        appliedSpec(4242420003, 'fra1', { ipv6: 'fd00::1' }),
        'spec.ipv6',
        /is the loopback of router fra1/,
      ],
      [
        'as4242420003-fra1',
        appliedSpec(4242420003, 'fra1', { publicKey: 'not a WireGuard key, but 44 characters long!' }),
        'spec.publicKey',
        /wireguard/i,
      ],
    ];
    for (const [name, spec, field, message] of cases) {
      const answer = await kube('POST', `${resources()}/peeringsessions`, sessionObject(name, spec));
      expect(answer.status, `${name} ${field}`).toBe(422);
      const cause = answer.body.details?.causes?.find((c) => c.field === field);
      expect(cause?.message, `${name} ${field}: ${answer.body.message}`).toMatch(message);
    }
    expect(store.listSessions()).toHaveLength(1);
  });

  it('stores a session that keeps every rule, which the controller then serves as pending review', async () => {
    const spec = appliedSpec(4242420004, 'fra1');
    const answer = await kube(
      'POST',
      `${resources()}/peeringsessions`,
      sessionObject('as4242420004-fra1', spec),
    );
    expect(answer.status).toBe(201);
    await controllerSees(2);
    const deadline = Date.now() + 5000;
    while (!store.getSession(spec.uuid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(store.getSession(spec.uuid)?.status).toMatchObject({ name: 'PENDING_REVIEW' });
  });

  it('refuses an update that adds a fault, and lets one through that keeps an old fault', async () => {
    const path = `${resources()}/peeringsessions/as4242420004-fra1`;
    const firstPort = store.listSessions({ asn: 4242420001 })[0]?.spec.listenPort;
    const clash = await kube('PATCH', path, { spec: { listenPort: firstPort } });
    expect(clash.status).toBe(422);
    expect(clash.body.details?.causes?.map((c) => c.field)).toEqual(['spec.listenPort']);
    const uuid = await kube('PATCH', path, { spec: { uuid: randomUUID() } });
    expect(uuid.body.details?.causes).toEqual([{ field: 'spec.uuid', message: 'cannot change' }]);

    // The policy blocks the session's ASN after it was stored. Once the controller judges with that policy
    // (a dry-run create of the ASN is refused for it), relabelling and editing the session still pass.
    await store.putPolicy('default', { ...defaultPolicy, blockedAsns: [4242420004] }, admin);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const probe = await kube(
        'POST',
        `${resources()}/peeringsessions?dryRun=All`,
        sessionObject('as4242420004-fra1', appliedSpec(4242420004, 'fra1')),
      );
      if (probe.body.details?.causes?.some((c) => c.field === 'spec.asn')) break;
      if (Date.now() > deadline)
        throw new Error(`the block never reached the webhook: ${probe.body.message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await kube('PATCH', path, { metadata: { labels: { team: 'noc' } } })).status).toBe(200);
    expect((await kube('PATCH', path, { spec: { mtu: 1400 } })).status).toBe(200);
    await store.putPolicy('default', defaultPolicy, admin);
  });

  it('refuses a router with a taken nodeId and warns about a policy that names no router', async () => {
    const router = await kube('POST', `${resources()}/routers`, {
      apiVersion: 'peerops.dev/v1alpha1',
      kind: 'Router',
      metadata: { name: 'ams1' },
      // fra1's nodeId, a loopback of its own (a taken loopback is its own cause)
      spec: routerSpec(1, { loopback: { ipv6: 'fd00::99' } }),
    });
    expect(router.status).toBe(422);
    expect(router.body.details?.causes).toEqual([
      { field: 'spec.nodeId', message: 'nodeId 1 is already used by router fra1' },
    ]);
    const policy = await kube('POST', `${resources()}/routingpolicies`, {
      apiVersion: 'peerops.dev/v1alpha1',
      kind: 'RoutingPolicy',
      metadata: { name: 'lon1' },
      spec: { blockedAsns: [4242420666] },
    });
    expect(policy.status).toBe(201);
    expect(policy.warnings.join('\n')).toMatch(/names no router/);
  });

  it('a controller that cannot serve the webhook does not start, and says why', async () => {
    const start = async (env: Record<string, string>) => {
      const child = await serve('admission-test-2', `127.0.0.1:${await freePort()}`, env);
      let stderr = '';
      child.stderr?.on('data', (b: Buffer) => (stderr += b.toString()));
      const code = await new Promise((r) => child.once('exit', r));
      return { code, stderr: stderr.trim() };
    };
    const busy = `127.0.0.1:${webhookPort}`;
    expect(await start({ PEEROPS_WEBHOOK_LISTEN: busy, PEEROPS_WEBHOOK_CERT_DIR: dir })).toEqual({
      code: 1,
      stderr: `peerops serve: cannot listen on ${busy}: the address is in use`,
    });
    const missing = join(dir, 'nowhere');
    expect(
      await start({
        PEEROPS_WEBHOOK_LISTEN: `127.0.0.1:${await freePort()}`,
        PEEROPS_WEBHOOK_CERT_DIR: missing,
      }),
    ).toEqual({ code: 1, stderr: `peerops serve: ${missing}/tls.crt: no such file or directory` });
  });

  it("exempts the controller's own writes: with the webhook down they still pass, the writer's do not", async () => {
    controller.kill('SIGTERM');
    await new Promise((r) => controller.once('exit', r));
    const refused = await kube(
      'POST',
      `${resources()}/peeringsessions`,
      sessionObject('as4242420005-fra1', appliedSpec(4242420005, 'fra1')),
    );
    expect(refused.status).toBe(500);
    expect(refused.body.message).toMatch(/failed calling webhook "validate.peerops.dev"/);
    const created = await store.createSession(
      newSession(4242420005, 'fra1'),
      pending,
      admin,
      'controller create',
    );
    expect(created.name).toBe('as4242420005-fra1');
  });
});
