/**
 * The traffic half of the `--history-prometheus` tests (test/api/history-prometheus.test.ts on the git
 * store, test/k8s/history-prometheus.test.ts on the Kubernetes store): bytes in and out of a span read
 * from Prometheus, merged over two replicas (docs/kubernetes.md, Session history).
 */
import { expect } from 'vitest';
import type { SessionHistoryResponse } from '../../common/history.ts';
import type { ControllerProcess } from './controller-process.ts';

async function lastDay(replica: ControllerProcess, uuid: string, token: string) {
  const answer = await replica.get(`/session/${uuid}/history?range=24h`, token);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return (answer.body as unknown as SessionHistoryResponse).points;
}

async function report(replica: ControllerProcess, agentToken: string, body: unknown): Promise<void> {
  const answer = await replica.post(agentToken, '/agent/fra1/report', body);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
}

/**
 * Given that the session's last report, on either replica, counted 5000 bytes in and 2500 out with 5
 * routes imported: waits until a finished span of the 24h graph holds it (a span's bytes are the rise
 * of the merged counter since the span before, controller/history/prometheus-history.ts; up to a
 * minute, the graph's step), sends the agent's next reports (to b, then a), and expects either replica
 * to answer the rise from counters whose reports reached one or the other.
 */
export async function expectTrafficMerged(
  [a, b]: [ControllerProcess, ControllerProcess],
  uuid: string,
  agentToken: string,
  userToken: string,
): Promise<void> {
  await expect
    .poll(async () => (await lastDay(a, uuid, userToken)).at(-2)?.routesImported, {
      timeout: 75_000,
      interval: 1000,
    })
    .toBe(5);
  // the agent's counters go on rising; its next report reaches b first, its last one a
  await report(b, agentToken, {
    sessions: [{ uuid, rtt: 11, rxBytes: 6000, txBytes: 3000, routesImported: 5, routesExported: 1480 }],
  });
  await report(a, agentToken, {
    sessions: [{ uuid, rtt: 10, rxBytes: 7000, txBytes: 4000, routesImported: 6, routesExported: 1481 }],
  });
  for (const replica of [a, b])
    await expect
      .poll(
        // the span whose end saw the last reports: the current one, or the one before once a minute
        // has passed since
        async () => (await lastDay(replica, uuid, userToken)).filter((p) => (p.rxBytes ?? 0) > 0).at(-1),
        { timeout: 20_000, interval: 500 },
      )
      // 7000 - 5000 in and 4000 - 2500 out: a's last report less the earlier one
      .toMatchObject({ rxBytes: 2000, txBytes: 1500, routesImported: 6 });
}
