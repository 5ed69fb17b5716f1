/**
 * The store conformance suite against a real kube-apiserver + etcd (built from their Go modules by
 * scripts/k8s-tools.sh). Every harness gets its own namespace; reopen() is a new store on the same one.
 */
import { randomUUID } from 'node:crypto';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { storeConformance } from '../store/conformance.ts';
import { admin, newSession, routerSpec } from '../store/fixtures.ts';
import { TOOLS_BUILD_TIMEOUT_MS, startApiServer, type TestApiServer } from './apiserver.ts';

let server: TestApiServer;

beforeAll(async () => {
  server = await startApiServer();
}, TOOLS_BUILD_TIMEOUT_MS);
afterAll(async () => {
  await server?.stop();
});

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
