/**
 * The looking glass across replicas (docs/kubernetes.md, Looking glass): three real `peerops serve`
 * processes on the Kubernetes store (a real kube-apiserver + etcd, test/k8s/apiserver.ts) and the real
 * agent's looking-glass service, whose long poll reaches one replica and whose answers reach another, as
 * a Service spreading its requests would. Callers ask every replica; each query is answered by the
 * agent (a real ping inside a network namespace the test creates) and leaves no ConfigMap behind.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BirdControl } from '../../agent/bird/control.ts';
import { LookingGlassService } from '../../agent/looking-glass/service.ts';
import { ControlPlaneClient } from '../../agent/sync/client.ts';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import { LABEL_LG_ROUTER } from '../../controller/looking-glass/kubernetes-broker.ts';
import { routerFields } from '../api/helpers.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { NetnsLab, waitFor } from '../support/netns.ts';
import { freePort } from '../support/ports.ts';
import { TOOLS_BUILD_TIMEOUT_MS, useApiServer } from './apiserver.ts';

const ADMIN_ASN = 4242420000;
/** The router's DN42 address, on the loopback of the namespace its agent's commands run in. */
const ROUTER_ADDRESS = 'fd42:4242:2601::1';

const server = useApiServer();
let dir: string;
let issuer: TokenIssuer;
let lab: NetnsLab;
const replicas: ControllerProcess[] = [];
const stopAgent = new AbortController();
let agentDone: Promise<void> | undefined;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-lg-replicas-'));
  issuer = new TokenIssuer(await loadOrCreateKey(join(dir, 'jwt-ed25519.pem')));
  lab = new NetnsLab('lgr');
  const ns = await lab.namespace('router');
  await ns.run('ip', ['-6', 'addr', 'add', `${ROUTER_ADDRESS}/128`, 'dev', 'lo']);
  // the agent's commands run in the router's namespace (agent/system/exec.ts), as under `ip netns exec`
  process.env['PEEROPS_AGENT_NETNS'] = ns.name;
}, TOOLS_BUILD_TIMEOUT_MS);

afterAll(async () => {
  stopAgent.abort();
  await agentDone;
  delete process.env['PEEROPS_AGENT_NETNS'];
  for (const r of replicas) await r.kill();
  await lab?.cleanup();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const admin = () => issuer.issueToken(ADMIN_ASN, 'admin').token;
const user = (asn: number) => issuer.issueToken(asn, 'user').token;

function agentClient(url: string, token: string): ControlPlaneClient {
  return new ControlPlaneClient({
    url,
    token,
    router: 'fra1',
    requestTimeout: 10,
    maxRetries: 0,
    retryInitialDelay: 200,
    retryMaxDelay: 1000,
  });
}

describe('the looking glass on three replicas', () => {
  it('answers a query sent to any replica while the agent polls another and answers a third', async () => {
    const namespace = await server.createNamespace('lg-replicas');
    const kubeconfig = await server.kubeconfigFile();
    for (const name of ['replica-a', 'replica-b', 'replica-c']) {
      const process = new ControllerProcess(join(dir, name), await freePort(), {
        PEEROPS_STORE: 'kubernetes',
        PEEROPS_NAMESPACE: namespace,
        KUBECONFIG: kubeconfig,
        POD_NAME: name,
        PEEROPS_JWT_KEY_FILE: join(dir, 'jwt-ed25519.pem'),
      });
      await process.start();
      replicas.push(process);
    }
    const [a, b, c] = replicas as [ControllerProcess, ControllerProcess, ControllerProcess];
    expect(
      (await a.post(admin(), '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } })).status,
    ).toBe(200);
    const added = await a.post(admin(), '/admin/router', { action: 'add', ...routerFields('fra1') });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    const { agentToken } = added.body as { agentToken: string };
    // every replica knows fra1 once its watch brought it
    for (const r of replicas)
      await waitFor(
        'the replica knows fra1',
        async () => JSON.stringify((await r.get('/routers')).body).includes('"fra1"'),
        10_000,
        50,
      );

    // 16 queries waiting (the agent not there yet), asked of replicas a and b: the 17th, asked of c,
    // is refused, as on one controller (the per-router limit counts every replica's queries)
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    const stored = async () =>
      (await core.listNamespacedConfigMap({ namespace, labelSelector: LABEL_LG_ROUTER })).items.length;
    const waiting = Array.from({ length: 16 }, (_, i) =>
      (i % 2 === 0 ? a : b).post(admin(), '/lg', { op: 'ping', router: 'fra1', target: ROUTER_ADDRESS }),
    );
    await waitFor('16 queries stored', async () => (await stored()) === 16, 10_000, 50);
    // c's watch has them within milliseconds of their writes
    await waitFor(
      'the 17th refused at c',
      async () => {
        const res = await c.post(admin(), '/lg', { op: 'ping', router: 'fra1', target: ROUTER_ADDRESS });
        return res.status === 429 ? res : undefined;
      },
      5_000,
      100,
    );

    // the agent polls replica b and posts its answers to replica c
    const polls = agentClient(b.base, agentToken);
    const answers = agentClient(c.base, agentToken);
    const service = new LookingGlassService(
      {
        lgQueries: (wait, signal) => polls.lgQueries(wait, signal),
        lgAnswer: (id, answer) => answers.lgAnswer(id, answer),
        failureDelay: (n) => polls.failureDelay(n),
      },
      // no BIRD: these queries are pings (the BIRD ones: test/agent/looking-glass.test.ts)
      new BirdControl(join(dir, 'no-bird.ctl')),
      pino({ level: 'silent' }),
    );
    agentDone = service.run(stopAgent.signal);

    // the 16 that waited are answered once the agent polls
    for (const answer of await Promise.all(waiting))
      expect(answer.body['output'], JSON.stringify(answer.body)).toMatch(/4 received/);

    const started = Date.now();
    const asked = await Promise.all(
      [a, b, c, a, c, b].map((r, i) =>
        r.post(i % 2 === 0 ? admin() : user(4242421000 + i), '/lg', {
          op: 'ping',
          router: 'fra1',
          target: ROUTER_ADDRESS,
        }),
      ),
    );
    console.log(`6 pings through 3 replicas answered in ${Date.now() - started} ms`);
    for (const answer of asked) {
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body['output']).toMatch(/4 packets transmitted, 4 received/);
      expect(answer.body).toMatchObject({ exitCode: 0, truncated: false, timedOut: false });
    }

    // a peer is still held to DN42's ranges on every replica, before anything reaches the agent
    const refused = await c.post(user(4242421009), '/lg', {
      op: 'ping',
      router: 'fra1',
      target: '192.0.2.1',
    });
    expect(refused.status).toBe(400);

    // no query is left in the store once answered
    await waitFor('the answered queries deleted', async () => (await stored()) === 0, 10_000, 100);
  }, 120_000);
});
