/**
 * The store conformance suite against a real kube-apiserver + etcd (built from their Go modules by
 * scripts/k8s-tools.sh). Every harness gets its own namespace; reopen() is a new store on the same one.
 */
import { randomUUID } from 'node:crypto';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { storeConformance } from '../store/conformance.ts';
import { admin, newSession, queued, routerSpec } from '../store/fixtures.ts';
import { eventually } from '../store/git-helpers.ts';
import { useApiServer } from './apiserver.ts';

const server = useApiServer();

storeConformance('kubernetes', async () => {
  const namespace = await server.createNamespace('conf');
  const open = async (): Promise<Store> => {
    const store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace, flushIntervalMs: 200 });
    await store.start();
    return store;
  };
  return { store: await open(), reopen: open, cleanup: async () => {} };
});

describe('a session applied without status (kubectl, Flux, Argo CD)', () => {
  it('is PENDING_REVIEW, or QUEUED_FOR_SETUP when the default policy says a merge is an approval', async () => {
    const namespace = await server.createNamespace('applied');
    const store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace });
    await store.start();
    try {
      await store.createRouter('fra1', routerSpec(1), admin);
      const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
      const apply = (asn: number) =>
        custom.createNamespacedCustomObject({
          group: 'peerops.dev',
          version: 'v1alpha1',
          namespace,
          plural: 'peeringsessions',
          body: {
            apiVersion: 'peerops.dev/v1alpha1',
            kind: 'PeeringSession',
            metadata: { name: `as${asn}-fra1` },
            spec: { ...newSession(asn, 'fra1'), uuid: randomUUID(), listenPort: 30000 + (asn % 1000) },
          },
        });
      const statusOf = async (asn: number) => {
        const deadline = Date.now() + 5000;
        for (;;) {
          const found = store.listSessions({ asn })[0];
          if (found || Date.now() > deadline) return found?.status;
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      await apply(4242420001);
      expect(await statusOf(4242420001)).toMatchObject({ code: 3, name: 'PENDING_REVIEW' });
      await store.putPolicy('default', { dn42Asn: 4242420000, mergeIsApproval: true }, admin);
      await apply(4242420002);
      const approved = await statusOf(4242420002);
      expect(approved).toMatchObject({ code: 4, name: 'QUEUED_FOR_SETUP' });
      expect(Date.now() - Date.parse(approved?.lastTransitionTime ?? '')).toBeLessThan(60_000);
    } finally {
      await store.close();
    }
  });
});

describe('session metrics on status', () => {
  it('are written at most once per metricsWriteIntervalMs; the replica that got newer ones serves them, and shutdown writes them', async () => {
    const namespace = await server.createNamespace('metrics');
    const open = async () => {
      const store = createKubernetesStore({
        kubeConfig: server.kubeConfig(),
        namespace,
        flushIntervalMs: 3_600_000,
        metricsWriteIntervalMs: 60_000,
      });
      await store.start();
      return store;
    };
    const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const written = async (name: string) => {
      const object = (await custom.getNamespacedCustomObject({
        group: 'peerops.dev',
        version: 'v1alpha1',
        namespace,
        plural: 'peeringsessions',
        name,
      })) as { status?: { metrics?: { rtt: number } } };
      return object.status?.metrics?.rtt;
    };
    const metrics = (rtt: number) => ({
      rtt,
      rxBytes: 1,
      txBytes: 1,
      routesImported: 1,
      at: new Date().toISOString(),
    });
    const store = await open();
    const other = await open();
    try {
      await store.createRouter('fra1', routerSpec(1), admin);
      const s = await store.createSession(newSession(4242420011, 'fra1'), queued, admin, 'c');
      store.recordSessionMetrics(s.spec.uuid, metrics(1));
      await store.flushObservations();
      expect(await written(s.name)).toBe(1);
      store.recordSessionMetrics(s.spec.uuid, metrics(2));
      await store.flushObservations();
      // within the interval: not written, served by this replica only
      expect(await written(s.name)).toBe(1);
      expect(store.getSession(s.spec.uuid)?.status.metrics?.rtt).toBe(2);
      await eventually(() => other.getSession(s.spec.uuid)?.status.metrics?.rtt === 1);
      await store.close();
      expect(await written(s.name)).toBe(2);
      await eventually(() => other.getSession(s.spec.uuid)?.status.metrics?.rtt === 2);
    } finally {
      await store.close();
      await other.close();
    }
  });
});
