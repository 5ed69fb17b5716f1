/**
 * Where the Kubernetes store keeps waiting events (docs/kubernetes.md, "The outbox"), with two store
 * replicas on a real kube-apiserver + etcd: a session's events on its object, read by the other replica;
 * a deletion's record, which counts only once the session is gone, so the record a replica killed
 * between record and delete leaves behind is never delivered and goes with the next delete; an offline
 * agent's record; and confirmations, which empty every object and record.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { agentOfflineEvent, sessionEvent } from '../../controller/store/core/events.ts';
import { KubeApi } from '../../controller/store/kubernetes/api.ts';
import { createKubernetesStore, type KubernetesStore } from '../../controller/store/kubernetes/index.ts';
import { admin, newSession, pending, routerSpec } from '../store/fixtures.ts';
import { eventually } from '../store/git-helpers.ts';
import { useApiServer } from './apiserver.ts';

const server = useApiServer();

const types = (store: KubernetesStore) => store.outbox().map((e) => e.type);

describe('the Kubernetes outbox', () => {
  it('counts a deletion record once its session is gone; one left before a delete that never came, never', async () => {
    const namespace = await server.createNamespace('outbox');
    const stores = [0, 1].map(() =>
      createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace, flushIntervalMs: 200 }),
    ) as [KubernetesStore, KubernetesStore];
    const [a, b] = stores;
    const records = async () =>
      (
        await server
          .kubeConfig()
          .makeApiClient(CoreV1Api)
          .listNamespacedConfigMap({ namespace, labelSelector: 'peerops.dev/outbox' })
      ).items;
    try {
      await a.start();
      await a.createRouter('fra1', routerSpec(1), admin);
      const session = await a.createSession(newSession(4242420041, 'fra1'), pending, admin, 'create');
      expect(types(a)).toEqual(['session.created', 'session.pending_review']);

      // a replica killed between its deletion record and its delete leaves this behind
      const api = new KubeApi(server.kubeConfig(), namespace);
      const stored = await api.get('PeeringSession', session.name);
      const orphan = sessionEvent('session.deleted', session, new Date().toISOString());
      await api.createOutboxRecord([{ event: orphan, seq: 1, recordedAt: new Date().toISOString() }], {
        name: session.name,
        uid: stored?.metadata.uid ?? '',
        resourceVersion: stored?.metadata.resourceVersion ?? '',
      });

      // a replica starting now (a new leader) reads the session's events from its object, not the orphan
      await b.start();
      expect(types(b)).toEqual(['session.created', 'session.pending_review']);
      await new Promise((r) => setTimeout(r, 500));
      expect(types(a)).not.toContain('session.deleted');

      // the session changes (its resourceVersion moves on), then is deleted: one session.deleted, the real one
      await a.updateSession(session.spec.uuid, (s) => ({ spec: { ...s.spec, mtu: 1400 } }), admin, 'mtu');
      await a.updateSession(session.spec.uuid, () => ({ delete: true }), admin, 'delete');
      await eventually(() => types(b).includes('session.deleted'));
      const deleted = b.outbox().filter((e) => e.type === 'session.deleted');
      expect(deleted).toHaveLength(1);
      expect(deleted[0]?.id).not.toBe(orphan.id);
      expect(types(b)).toEqual(['session.created', 'session.pending_review', 'session.deleted']);
      expect(await records()).toHaveLength(1);

      // an offline agent's event: a record of its own, read by the other replica
      const router = b.getRouter('fra1');
      if (!router) throw new Error('no router');
      await b.appendEvents([agentOfflineEvent(router, new Date().toISOString())]);
      await eventually(() => types(a).includes('router.agent_offline'));
      expect(await records()).toHaveLength(2);

      // confirmed at one replica: gone from every object and record, and from the other's outbox
      await b.confirmDelivered(b.outbox().map((e) => e.id));
      expect(b.outbox()).toEqual([]);
      await eventually(() => a.outbox().length === 0);
      expect(await records()).toEqual([]);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});
