/**
 * The store conformance suite against a real kube-apiserver + etcd (built from their Go modules by
 * scripts/k8s-tools.sh). Every harness gets its own namespace; reopen() is a new store on the same one.
 */
import { afterAll, beforeAll } from 'vitest';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { storeConformance } from '../store/conformance.ts';
import { startApiServer, type TestApiServer } from './apiserver.ts';

let server: TestApiServer;
const processStarted = Date.now() - process.uptime() * 1000;

beforeAll(async () => {
  server = await startApiServer();
  console.log(
    `first Kubernetes test starts ${((Date.now() - processStarted) / 1000).toFixed(1)}s after the test process started (tool build included)`,
  );
});
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
