/**
 * Kubernetes conventions on the store's objects (docs/kubernetes.md, Conditions): `kubectl wait
 * --for=condition=Ready` on a PeeringSession returns once its router's agent reports it up, and not
 * before; Routers are Ready once their agent heartbeats, RoutingPolicies once the controller accepted
 * them, each with the generation it judged. A real kube-apiserver and the real kubectl (both built by
 * scripts/k8s-tools.sh); the agent's report is the store write the agent route makes.
 */
import { spawn } from 'node:child_process';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { checkOrThrow } from '../../common/validate.ts';
import { HeartbeatBody } from '../../common/agent-api.ts';
import { SessionStatus } from '../../common/status.ts';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Actor } from '../../controller/store/store.ts';
import { admin, newSession, queued, routerSpec, wgKey } from '../store/fixtures.ts';
import { eventually } from '../store/git-helpers.ts';
import { useApiServer } from './apiserver.ts';

const server = useApiServer();
const agent: Actor = { name: 'agent fra1', role: 'agent' };

interface Condition {
  type: string;
  status: string;
  reason: string;
  observedGeneration?: number;
}

/** The object as the API server holds it (what kubectl and Flux read). */
async function objectOf(
  namespace: string,
  plural: string,
  name: string,
): Promise<{
  metadata: { generation: number };
  status?: { conditions?: Condition[]; observedGeneration?: number };
}> {
  const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
  return (await custom.getNamespacedCustomObject({
    group: 'peerops.dev',
    version: 'v1alpha1',
    namespace,
    plural,
    name,
  })) as never;
}

const condition = (conditions: Condition[] | undefined, type: string) =>
  conditions?.find((c) => c.type === type);

describe('status conditions on the Kubernetes store', () => {
  it('kubectl wait --for=condition=Ready returns once the agent reports the session up', async () => {
    const namespace = await server.createNamespace('conditions');
    const kubeconfig = await server.kubeconfigFile();
    const store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace, flushIntervalMs: 200 });
    await store.start();
    try {
      await store.putPolicy('default', { dn42Asn: 4242420000 }, admin);
      await store.createRouter('fra1', routerSpec(1), admin);
      const session = await store.createSession(newSession(4242420021, 'fra1'), queued, admin, 'create');

      const created = await objectOf(namespace, 'peeringsessions', session.name);
      expect(condition(created.status?.conditions, 'Ready')).toMatchObject({
        status: 'False',
        reason: 'Provisioning',
        observedGeneration: created.metadata.generation,
      });
      expect(condition(created.status?.conditions, 'Reconciling')?.status).toBe('True');
      expect(created.status?.observedGeneration).toBe(created.metadata.generation);

      let output = '';
      const wait = spawn(
        server.tools.kubectl,
        [
          '--kubeconfig',
          kubeconfig,
          '-n',
          namespace,
          'wait',
          '--for=condition=Ready',
          `peeringsession/${session.name}`,
          '--timeout=120s',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      wait.stdout.on('data', (b: Buffer) => (output += b.toString()));
      wait.stderr.on('data', (b: Buffer) => (output += b.toString()));
      const exited = new Promise<number | null>((resolve) => wait.on('exit', (code) => resolve(code)));
      let done = false;
      void exited.then(() => (done = true));

      // kubectl has read the object (its watch is open) and waits: the session is not up yet
      await new Promise((r) => setTimeout(r, 1500));
      expect(done, `kubectl wait returned before the session was up:\n${output}`).toBe(false);

      // the agent reports the session up (what POST /agent/:router/report writes)
      await store.updateSession(
        session.spec.uuid,
        (s) => ({
          status: {
            ...s.status,
            code: SessionStatus.ACTIVE,
            name: 'ACTIVE',
            lastTransitionTime: new Date().toISOString(),
          },
        }),
        agent,
        'agent report: ACTIVE',
      );
      expect(await exited, output).toBe(0);
      expect(output).toContain(`peeringsession.peerops.dev/${session.name} condition met`);

      const up = await objectOf(namespace, 'peeringsessions', session.name);
      expect(condition(up.status?.conditions, 'Ready')).toMatchObject({
        status: 'True',
        reason: 'Established',
      });
      expect(condition(up.status?.conditions, 'Reconciling')?.status).toBe('False');
      expect(condition(up.status?.conditions, 'Stalled')?.status).toBe('False');
      // the REST record is built from the status fields it always had: conditions stay out of it
      expect(store.getSession(session.spec.uuid)?.status.code).toBe(SessionStatus.ACTIVE);
    } finally {
      await store.close();
    }
  });

  it('marks a router Ready once its agent heartbeats, and a policy once the controller accepted it', async () => {
    const namespace = await server.createNamespace('conditions');
    const store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace, flushIntervalMs: 100 });
    await store.start();
    try {
      await store.putPolicy('default', { dn42Asn: 4242420000 }, admin);
      const policy = await objectOf(namespace, 'routingpolicies', 'default');
      expect(condition(policy.status?.conditions, 'Ready')).toMatchObject({
        status: 'True',
        reason: 'Accepted',
        observedGeneration: policy.metadata.generation,
      });

      await store.createRouter('fra1', routerSpec(1), admin);
      const heartbeat = checkOrThrow(
        HeartbeatBody,
        { version: '1.0.0', uptime: 5, meshPublicKey: wgKey() },
        'heartbeat',
      );
      expect(store.recordHeartbeat('fra1', heartbeat)).toBe(true);
      await eventually(async () => {
        const router = await objectOf(namespace, 'routers', 'fra1');
        return condition(router.status?.conditions, 'Ready')?.status === 'True';
      });
      const router = await objectOf(namespace, 'routers', 'fra1');
      expect(condition(router.status?.conditions, 'Ready')).toMatchObject({
        reason: 'AgentReporting',
        observedGeneration: router.metadata.generation,
      });
    } finally {
      await store.close();
    }
  });
});
