/**
 * An adopted session in the Kubernetes store against a real kube-apiserver (test/k8s/apiserver.ts): the
 * store keeps the hand-made listen port and the `adopted` block through a reopen, a wanted port another
 * session holds is CONFLICT, and the CRD (generated from common/schema.ts) makes the API server refuse
 * an `adopted` block that breaks its rules, and a session without `ipv6` that is not adopted, as the store
 * would (docs/api.md, Adoptions).
 */
import { randomUUID } from 'node:crypto';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { isProblem } from '../../common/errors.ts';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import { admin, newSession, routerSpec } from '../store/fixtures.ts';
import { useApiServer } from './apiserver.ts';

const server = useApiServer();

const adopted = {
  by: admin.name,
  at: '2026-11-28T10:00:00.000Z',
  interface: 'wg_alice',
  protocols: ['dn42_alice_v6', 'dn42_alice_v4'],
  files: ['/etc/wireguard/wg_alice.conf', '/etc/bird/peers/alice.conf'],
};
const review = { code: 3 as const, name: 'PENDING_REVIEW' as const };

describe('an adopted session in the Kubernetes store', () => {
  it('keeps its port and adopted block, and the CRD refuses a bad block', async () => {
    const namespace = await server.createNamespace('adopted');
    const open = async () => {
      const store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace });
      await store.start();
      return store;
    };
    let store = await open();
    try {
      await store.createRouter('fra1', routerSpec(1), admin);
      const created = await store.createSession(
        newSession(4242420001, 'fra1', { listenPort: 31234, adopted }),
        review,
        admin,
        'adopt',
      );
      expect(created.spec).toMatchObject({ listenPort: 31234, adopted });
      const taken = await store
        .createSession(newSession(4242420002, 'fra1', { listenPort: 31234 }), review, admin, 'adopt')
        .catch((err: unknown) => err);
      expect(isProblem(taken, 'CONFLICT')).toBe(true);

      await store.close();
      store = await open();
      expect(store.getSession(created.spec.uuid)?.spec).toMatchObject({ listenPort: 31234, adopted });

      const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
      const refused = await custom
        .createNamespacedCustomObject({
          group: 'peerops.dev',
          version: 'v1alpha1',
          namespace,
          plural: 'peeringsessions',
          body: {
            apiVersion: 'peerops.dev/v1alpha1',
            kind: 'PeeringSession',
            metadata: { name: 'as4242420003-fra1' },
            spec: {
              ...newSession(4242420003, 'fra1'),
              uuid: randomUUID(),
              listenPort: 31300,
              adopted: { ...adopted, interface: 'wg_far_too_long_name', protocols: ['dn42-x'] },
            },
          },
        })
        .then(
          () => undefined,
          (err: { code?: number; body?: string }) => err,
        );
      expect(refused?.code).toBe(422);
      expect(String(refused?.body)).toContain('spec.adopted.interface');
      expect(String(refused?.body)).toContain('spec.adopted.protocols[0]');

      // without ipv6, only an adopted session: the CRD's rule, in the store's words
      const { ipv6: _dropped, ...withoutIpv6 } = newSession(4242420004, 'fra1');
      const create = (name: string, spec: object) =>
        custom
          .createNamespacedCustomObject({
            group: 'peerops.dev',
            version: 'v1alpha1',
            namespace,
            plural: 'peeringsessions',
            body: { apiVersion: 'peerops.dev/v1alpha1', kind: 'PeeringSession', metadata: { name }, spec },
          })
          .then(
            () => undefined,
            (err: { code?: number; body?: string }) => err,
          );
      const noIpv6 = await create('as4242420004-fra1', {
        ...withoutIpv6,
        uuid: randomUUID(),
        listenPort: 31301,
      });
      expect(noIpv6?.code).toBe(422);
      expect(String(noIpv6?.body)).toContain('spec.ipv6 is required: only a session adopted');
      expect(
        await create('as4242420005-fra1', {
          ...withoutIpv6,
          asn: 4242420005,
          uuid: randomUUID(),
          listenPort: 31302,
          adopted: { ...adopted, interface: 'wg_bob' },
        }),
      ).toBeUndefined();
    } finally {
      await store.close();
    }
  });
});
