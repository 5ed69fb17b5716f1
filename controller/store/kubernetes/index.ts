/**
 * The Kubernetes back end (PEEROPS_STORE=kubernetes): createKubernetesStore for the store, LeaderElector
 * so that only one replica runs the reconciler. Without a kubeConfig the in-cluster service account (or
 * $KUBECONFIG) is used; without a namespace, PEEROPS_NAMESPACE, then the pod's own namespace.
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import type pino from 'pino';
import type { Store } from '../store.ts';
import { KubernetesStore, type KubernetesStoreOptions } from './kubernetes-store.ts';

export { KubernetesStore, type KubernetesStoreOptions } from './kubernetes-store.ts';
export { LeaderElector, type LeaderElectorOptions } from './leader.ts';

const SERVICE_ACCOUNT_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The namespace to use: PEEROPS_NAMESPACE, else the pod's namespace, else `default`. */
export function defaultNamespace(env: NodeJS.ProcessEnv = process.env): string {
  if (env['PEEROPS_NAMESPACE']) return env['PEEROPS_NAMESPACE'];
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE, 'utf8').trim() || 'default';
  } catch {
    return 'default';
  }
}

/** In-cluster configuration inside a pod, else $KUBECONFIG or ~/.kube/config. */
export function defaultKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return kc;
}

export function createKubernetesStore(
  options: Partial<Pick<KubernetesStoreOptions, 'kubeConfig' | 'namespace'>> &
    Omit<KubernetesStoreOptions, 'kubeConfig' | 'namespace'> & { logger?: pino.Logger } = {},
): Store {
  return new KubernetesStore({
    ...options,
    kubeConfig: options.kubeConfig ?? defaultKubeConfig(),
    namespace: options.namespace ?? defaultNamespace(),
  });
}
