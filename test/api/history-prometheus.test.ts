/**
 * Session history from Prometheus (docs/kubernetes.md, Session history): a real Prometheus
 * (/usr/bin/prometheus) scrapes two real `peerops serve` replicas on loopback every second; each
 * replica gets different agents' reports, and the history API of either answers the points merged over
 * both, the bytes in and out of a span too (the rise of counters whose reports reached either). The
 * replicas are git-store processes started from one copy of a data directory (same session
 * uuid, same token key) rather than Kubernetes-store pods: what is under test is that each exports only
 * the reports it received and that the history read from Prometheus merges them, which two separate
 * stores show more strictly than one shared one. A controller whose Prometheus does not answer gets 503
 * HISTORY_UNAVAILABLE with its message key.
 */
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenIssuer, defaultKeyPath } from '../../controller/auth/jwt.ts';
import type { SessionHistoryResponse } from '../../common/history.ts';
import { routerFields, sessionFields } from './helpers.ts';
import { ControllerProcess } from '../support/controller-process.ts';
import { freePort } from '../support/ports.ts';
import { expectTrafficMerged } from '../support/history-replicas.ts';
import { startPrometheus, type TestPrometheus } from '../support/prometheus.ts';

const ADMIN_ASN = 4242420000;
const PEER_ASN = 4242421234;

let dir: string;
let prometheus: TestPrometheus | undefined;
const replicas: ControllerProcess[] = [];
let issuer: TokenIssuer;
let uuid: string;
let agentToken: string;

const admin = () => issuer.issueToken(ADMIN_ASN, 'admin').token;
const user = () => issuer.issueToken(PEER_ASN, 'user').token;

async function ok(controller: ControllerProcess, token: string, path: string, body: unknown) {
  const answer = await controller.post(token, path, body);
  expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(200);
  return answer.body;
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-history-prom-'));
  // the first replica makes the router and the session; the second starts from a copy of its data
  // no DN42 registry here: auto-approval needs the operator's opt-in (docs/operator-guide.md, 4)
  const setup = new ControllerProcess(join(dir, 'a'), await freePort(), {
    PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY: 'true',
  });
  await setup.start();
  issuer = await TokenIssuer.fromFile(defaultKeyPath(join(dir, 'a')));
  await ok(setup, admin(), '/admin/policy', { action: 'set', spec: { dn42Asn: ADMIN_ASN } });
  ({ agentToken } = (await ok(setup, admin(), '/admin/router', {
    action: 'add',
    ...routerFields('fra1', { autoApprove: true }),
  })) as { agentToken: string });
  ({ uuid } = (await ok(setup, user(), '/session', sessionFields('fra1'))) as { uuid: string });
  expect(await setup.stop()).toBe(0);
  await cp(join(dir, 'a'), join(dir, 'b'), { recursive: true });

  const ports = [await freePort(), await freePort()];
  prometheus = await startPrometheus(dir, ports);
  for (const [i, port] of ports.entries())
    replicas.push(
      new ControllerProcess(join(dir, i === 0 ? 'a' : 'b'), port as number, {}, [
        '--history-prometheus',
        prometheus.url,
      ]),
    );
  await Promise.all(replicas.map((r) => r.start()));
}, 60_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.kill()));
  await prometheus?.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('session history from Prometheus', () => {
  it('answers, from either replica, the reports both replicas received', async () => {
    const [a, b] = replicas as [ControllerProcess, ControllerProcess];
    // RTT reaches only replica a; the route counts b got are the later, larger ones
    await ok(a, agentToken, '/agent/fra1/report', {
      sessions: [{ uuid, rtt: 12.5, rxBytes: 1000, txBytes: 500, routesImported: 3 }],
    });
    await ok(b, agentToken, '/agent/fra1/report', {
      sessions: [{ uuid, rtt: null, rxBytes: 5000, txBytes: 2500, routesImported: 5, routesExported: 1480 }],
    });
    for (const replica of [a, b]) {
      await expect
        .poll(
          async () => {
            const answer = await replica.get(`/session/${uuid}/history?range=24h`, user());
            expect(answer.status).toBe(200);
            const history = answer.body as unknown as SessionHistoryResponse;
            return { ...history, points: history.points.slice(-1) };
          },
          { timeout: 20_000, interval: 500 },
        )
        .toMatchObject({
          uuid,
          range: '24h',
          stepSeconds: 60,
          points: [{ rtt: 12.5, routesImported: 5, routesExported: 1480 }],
        });
    }
    // the other ranges keep their resolution
    const week = await a.get(`/session/${uuid}/history?range=7d`, admin());
    expect(week.body).toMatchObject({ range: '7d', stepSeconds: 300 });
    expect((week.body as unknown as SessionHistoryResponse).points.at(-1)).toMatchObject({
      rtt: 12.5,
      routesImported: 5,
    });
  }, 40_000);

  it('answers the bytes in and out of a span from counters the two replicas got', async () => {
    // the first test left b's counters (5000 in, 2500 out) the largest
    await expectTrafficMerged(replicas as [ControllerProcess, ControllerProcess], uuid, agentToken, user());
  }, 100_000);

  it('answers 503 HISTORY_UNAVAILABLE with its key when Prometheus does not answer', async () => {
    const port = await freePort();
    const lonely = new ControllerProcess(join(dir, 'a'), port, {}, [
      '--history-prometheus',
      `http://127.0.0.1:${await freePort()}`,
    ]);
    await (replicas[0] as ControllerProcess).kill();
    await lonely.start();
    try {
      const answer = await lonely.get(`/session/${uuid}/history`, user());
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({
        code: 'HISTORY_UNAVAILABLE',
        key: 'history.prometheusUnavailable',
      });
    } finally {
      await lonely.kill();
    }
  }, 40_000);
});
