/**
 * Session history from Prometheus on the Kubernetes store (docs/kubernetes.md, Session history): two
 * real `peerops serve` replicas on one real kube-apiserver (test/k8s/apiserver.ts) with
 * `--history-prometheus`, scraped every second by a real Prometheus on loopback. The agent's reports
 * reach one replica or the other, as through a Service; either answers the RTT, route counts and the
 * bytes in and out of a span merged over both. (The git-store run, with replicas that share nothing:
 * test/api/history-prometheus.test.ts.)
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionHistoryResponse } from '../../common/history.ts';
import { TokenIssuer, loadOrCreateKey } from '../../controller/auth/jwt.ts';
import { routerFields, sessionFields } from '../api/helpers.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { expectTrafficMerged } from '../support/history-replicas.ts';
import { freePort } from '../support/ports.ts';
import { startPrometheus, type TestPrometheus } from '../support/prometheus.ts';
import { TOOLS_BUILD_TIMEOUT_MS, useApiServer } from './apiserver.ts';

const ADMIN_ASN = 4242420000;
const PEER_ASN = 4242421234;

const server = useApiServer();
let dir: string;
let prometheus: TestPrometheus | undefined;
let issuer: TokenIssuer;
const replicas: ControllerProcess[] = [];
let ports: number[];

const admin = () => issuer.issueToken(ADMIN_ASN, 'admin').token;
const user = () => issuer.issueToken(PEER_ASN, 'user').token;

async function ok(controller: ControllerProcess, token: string, path: string, body: unknown) {
  const answer = await controller.post(token, path, body);
  expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(200);
  return answer.body;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-k8s-history-'));
  issuer = new TokenIssuer(await loadOrCreateKey(join(dir, 'jwt-ed25519.pem')));
  const namespace = await server.createNamespace('history-prom');
  const kubeconfig = await server.kubeconfigFile();
  ports = [await freePort(), await freePort()];
  prometheus = await startPrometheus(dir, ports);
  for (const [i, port] of ports.entries())
    replicas.push(
      new ControllerProcess(
        join(dir, `replica-${i}`),
        port as number,
        {
          PEEROPS_STORE: 'kubernetes',
          // no DN42 registry here: auto-approval needs the operator's opt-in (docs/operator-guide.md, 4)
          PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY: 'true',
          PEEROPS_NAMESPACE: namespace,
          KUBECONFIG: kubeconfig,
          POD_NAME: `replica-${i}`,
          PEEROPS_JWT_KEY_FILE: join(dir, 'jwt-ed25519.pem'),
        },
        ['--history-prometheus', prometheus.url],
      ),
    );
  await Promise.all(replicas.map((r) => r.start()));
}, TOOLS_BUILD_TIMEOUT_MS);

afterAll(async () => {
  for (const r of replicas) await r.kill();
  await prometheus?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('session history from Prometheus on the Kubernetes store', () => {
  it('answers, from either replica, the figures and the traffic of reports either received', async () => {
    const [a, b] = replicas as [ControllerProcess, ControllerProcess];
    await ok(a, admin(), '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } });
    const { agentToken } = (await ok(a, admin(), '/admin/router', {
      action: 'add',
      ...routerFields('fra1', { autoApprove: true }),
    })) as { agentToken: string };
    const { uuid } = (await ok(a, user(), '/session', sessionFields('fra1'))) as { uuid: string };
    // b reads the session from its watch before an agent's report can reach it
    await expect
      .poll(async () => (await b.get(`/session/${uuid}/history`, admin())).status, {
        timeout: 10_000,
        interval: 200,
      })
      .toBe(200);

    await ok(a, agentToken, '/agent/fra1/report', {
      sessions: [{ uuid, rtt: 12.5, rxBytes: 1000, txBytes: 500, routesImported: 3 }],
    });
    // A replica keeps the reports it got and writes them to the session's status now and then; its
    // watch brings it the others' (docs/kubernetes.md). The agent's next report comes a minute later:
    // b has a's by then.
    await expect
      .poll(
        async () =>
          (await (await fetch(`http://127.0.0.1:${ports[1]}/metrics`)).text()).includes(
            `peerops_session_routes_imported{session="${uuid}",router="fra1",asn="${PEER_ASN}"} 3`,
          ),
        { timeout: 10_000, interval: 200 },
      )
      .toBe(true);
    await ok(b, agentToken, '/agent/fra1/report', {
      sessions: [{ uuid, rtt: 12.5, rxBytes: 5000, txBytes: 2500, routesImported: 5, routesExported: 1480 }],
    });
    for (const replica of [a, b])
      await expect
        .poll(
          async () => {
            const answer = await replica.get(`/session/${uuid}/history?range=24h`, user());
            return (answer.body as unknown as SessionHistoryResponse).points?.at(-1);
          },
          { timeout: 20_000, interval: 500 },
        )
        .toMatchObject({ rtt: 12.5, routesImported: 5, routesExported: 1480 });

    await expectTrafficMerged([a, b], uuid, agentToken, user());
  }, 120_000);
});
