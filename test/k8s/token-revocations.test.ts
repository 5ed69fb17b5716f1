/**
 * Token revocations with several replicas of the Kubernetes store (docs/login.md, Revoking tokens): one
 * Secret that every replica watches, written at the resourceVersion read, against a real kube-apiserver.
 */
import { describe, expect, it } from 'vitest';
import { newTokenId } from '../../controller/auth/token-id.ts';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { admin } from '../store/fixtures.ts';
import { eventually } from '../store/git-helpers.ts';
import { useApiServer } from './apiserver.ts';

const server = useApiServer();

async function replicas(n: number): Promise<Store[]> {
  const namespace = await server.createNamespace('revoke');
  return Promise.all(
    Array.from({ length: n }, async () => {
      const store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace });
      await store.start();
      return store;
    }),
  );
}

describe('token revocations across replicas', () => {
  it('a revocation at one replica refuses the token at the others; concurrent ones all hold', async () => {
    const stores = await replicas(3);
    try {
      const [a, b, c] = stores as [Store, Store, Store];
      const now = Math.floor(Date.now() / 1000);
      const id = newTokenId(4242421234, now + 3600);
      await a.revokeTokens({ token: id }, admin);
      await eventually(() => b.tokenRevoked(id, 4242421234, now));
      await eventually(() => c.tokenRevoked(id, 4242421234, now));

      // written at once from every replica: each write retries on the others' (409) and keeps theirs
      const ids = Array.from({ length: 9 }, (_, i) => newTokenId(4242420000 + i, now + 3600));
      await Promise.all(ids.map((t, i) => (stores[i % 3] as Store).revokeTokens({ token: t }, admin)));
      await b.revokeTokens({ asn: 4242425678 }, admin);
      const expected = { tokens: [id, ...ids].sort(), asns: ['4242425678'] };
      for (const store of stores) {
        const seen = () => {
          const list = store.listRevocations();
          return { tokens: list.tokens, asns: Object.keys(list.asns) };
        };
        await eventually(() => JSON.stringify(seen()) === JSON.stringify(expected)).catch(() => undefined);
        expect(seen()).toEqual(expected);
      }
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});
