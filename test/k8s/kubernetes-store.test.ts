/**
 * The store conformance suite against a real kube-apiserver + etcd (built from their Go modules by
 * scripts/k8s-tools.sh). Every harness gets its own namespace; reopen() is a new store on the same one.
 */
import { afterAll, beforeAll } from 'vitest';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { storeConformance } from '../store/conformance.ts';
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
