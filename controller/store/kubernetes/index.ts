/**
 * The Kubernetes back end (PEEROPS_STORE=kubernetes): createKubernetesStore for the store (the core
 * holding the back end), LeaderElector
 * so that only one replica runs the reconciler. Without a kubeConfig the in-cluster service account (or
 * $KUBECONFIG) is used; without a namespace, PEEROPS_NAMESPACE, then the pod's own namespace.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import type pino from 'pino';
import { StoreCore } from '../core/store-core.ts';
import { KubernetesBackend, type KubernetesStoreOptions } from './kubernetes-store.ts';
import { LeaderElector } from './leader.ts';

export { KubernetesBackend, type KubernetesStoreOptions } from './kubernetes-store.ts';
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

/** The store over custom resources; its back end's own extras (flushObservations with options) are `storage`'s. */
export type KubernetesStore = StoreCore<KubernetesBackend>;

export function createKubernetesStore(
  options: Partial<Pick<KubernetesStoreOptions, 'kubeConfig' | 'namespace'>> &
    Omit<KubernetesStoreOptions, 'kubeConfig' | 'namespace'> & { logger?: pino.Logger } = {},
): KubernetesStore {
  const resolved = {
    ...options,
    kubeConfig: options.kubeConfig ?? defaultKubeConfig(),
    namespace: options.namespace ?? defaultNamespace(),
  };
  return new StoreCore((state) => new KubernetesBackend(resolved, state));
}

/** What electReconciler runs while leading: the controller's SessionReconciler (start again after stop is fine). */
export interface Leadable {
  start(): void;
  stop(): Promise<void>;
}

/**
 * Runs `reconciler` only while this replica holds the Lease PEEROPS_LEASE_NAME (default
 * `peerops-controller`, in the store's namespace) for PEEROPS_LEASE_DURATION_SECONDS (default 15); the
 * identity is POD_NAME (else the host name). Returns the started elector: stop() it on shutdown, which
 * hands the lease to another replica at once.
 */
export function electReconciler(
  reconciler: Leadable,
  options: {
    logger?: pino.Logger;
    kubeConfig?: KubeConfig;
    namespace?: string;
    env?: NodeJS.ProcessEnv;
  } = {},
): LeaderElector {
  const env = options.env ?? process.env;
  const duration = Number(env['PEEROPS_LEASE_DURATION_SECONDS'] ?? 15);
  if (!Number.isInteger(duration) || duration < 1)
    throw new Error(
      `PEEROPS_LEASE_DURATION_SECONDS must be a whole number of seconds, not '${String(env['PEEROPS_LEASE_DURATION_SECONDS'])}'`,
    );
  const elector = new LeaderElector({
    kubeConfig: options.kubeConfig ?? defaultKubeConfig(),
    namespace: options.namespace ?? defaultNamespace(env),
    name: env['PEEROPS_LEASE_NAME'] || 'peerops-controller',
    identity: env['POD_NAME'] || hostname(),
    leaseDurationSeconds: duration,
    onStartedLeading: () => reconciler.start(),
    onStoppedLeading: () => reconciler.stop(),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  elector.start();
  return elector;
}
