/**
 * The chart's ServiceAccount, Role and RoleBinding, applied for real, are enough for the controller: a
 * store and a LeaderElector run with a token of that ServiceAccount (TokenRequest API) do everything
 * they do in production — and the ServiceAccount can do nothing outside its namespace.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  CoreV1Api,
  KubernetesObjectApi,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { LeaderElector, createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import { admin, defaultPolicy, newSession, pending, queued, routerSpec, user } from '../store/fixtures.ts';
import { ROOT, useApiServer } from './apiserver.ts';

const run = promisify(execFile);
const server = useApiServer();

async function serviceAccountConfig(namespace: string): Promise<KubeConfig> {
  const { stdout } = await run(
    server.tools.helm,
    [
      'template',
      'peerops',
      join(ROOT, 'charts', 'peerops'),
      '--namespace',
      namespace,
      '--show-only',
      'templates/serviceaccount.yaml',
      '--show-only',
      'templates/rbac.yaml',
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        HELM_CACHE_HOME: join(ROOT, '.cache', 'helm'),
        HELM_CONFIG_HOME: join(ROOT, '.cache', 'helm'),
      },
    },
  );
  const client = KubernetesObjectApi.makeApiClient(server.kubeConfig());
  const objects = loadAll(stdout).filter((o): o is KubernetesObject => typeof o === 'object' && o !== null);
  expect(objects.map((o) => o.kind).sort()).toEqual(['Role', 'RoleBinding', 'ServiceAccount']);
  for (const object of objects)
    await client.create({ ...object, metadata: { ...object.metadata, namespace } });
  const name = objects.find((o) => o.kind === 'ServiceAccount')?.metadata?.name ?? '';
  return server.serviceAccountKubeConfig(namespace, name);
}

describe("the chart's RBAC", () => {
  it('lets the controller run the store and the Lease with its ServiceAccount, and nothing outside its namespace', async () => {
    const namespace = await server.createNamespace('rbac');
    const kc = await serviceAccountConfig(namespace);
    const store = createKubernetesStore({ kubeConfig: kc, namespace, flushIntervalMs: 100 });
    await store.start();
    try {
      await store.createRouter('fra1', routerSpec(1), admin);
      await store.setAgentTokenHash('fra1', 'c'.repeat(64), admin);
      await store.putPolicy('default', defaultPolicy, admin);
      const s = await store.createSession(newSession(64512, 'fra1'), pending, user(64512), 'c');
      await store.updateSession(s.spec.uuid, () => ({ status: queued }), admin, 'approve');
      store.recordSessionMetrics(s.spec.uuid, {
        rtt: 1,
        rxBytes: 1,
        txBytes: 1,
        routesImported: 1,
        at: '2026-01-01T00:00:00.000Z',
      });
      store.recordRouterStatus('fra1', { lastHeartbeat: '2026-01-01T00:00:00.000Z' });
      await store.close();
      const reopened = createKubernetesStore({ kubeConfig: kc, namespace });
      await reopened.start();
      expect(reopened.getAgentTokenHash('fra1')).toBe('c'.repeat(64));
      expect(reopened.getSession(s.spec.uuid)?.status).toMatchObject({ code: 4, metrics: { rxBytes: 1 } });
      expect(reopened.getRouter('fra1')?.status.lastHeartbeat).toBe('2026-01-01T00:00:00.000Z');
      // the audit trail: one Event per change, naming who made it
      const events = await server
        .kubeConfig()
        .makeApiClient(CoreV1Api)
        .listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${s.name}` });
      expect(events.items.map((e) => `${e.reason} ${e.message}`)).toEqual(
        expect.arrayContaining([
          'Created AS64512: c (status 3 PENDING_REVIEW)',
          `StatusChanged ${admin.name}: approve (status 4 QUEUED_FOR_SETUP)`,
        ]),
      );
      await reopened.updateSession(s.spec.uuid, () => ({ delete: true }), admin, 'delete');
      await reopened.deleteRouter('fra1', admin);
      await reopened.close();
    } finally {
      await store.close();
    }

    let leading = false;
    const elector = new LeaderElector({
      kubeConfig: kc,
      namespace,
      name: 'peerops-controller',
      identity: 'pod-1',
      leaseDurationSeconds: 2,
      retryIntervalMs: 100,
      onStartedLeading: () => void (leading = true),
      onStoppedLeading: () => void (leading = false),
    });
    elector.start();
    const deadline = Date.now() + 5000;
    while (!leading && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await elector.stop();
    expect(leading).toBe(false);
    expect(elector.isLeader).toBe(false);

    const other = await server.createNamespace('other');
    const foreign = createKubernetesStore({ kubeConfig: kc, namespace: other });
    await expect(foreign.start()).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
  });
});
