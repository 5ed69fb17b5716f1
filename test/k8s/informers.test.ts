/**
 * The store's informers (controller/store/kubernetes/informers.ts) against a real kube-apiserver: the list
 * read in pages, a list started over when etcd's compaction expired its continue token, managedFields
 * dropped from listed and watched objects, and the objects on the API server keeping theirs when the
 * store writes the trimmed copies back. The API server reads continued lists from etcd here (see
 * startApiServer's listFromCacheSnapshot), where a compaction expires their tokens.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { GROUP_VERSION, type RouterSpec, type RouterStatus } from '../../common/schema.ts';
import { KubeApi } from '../../controller/store/kubernetes/api.ts';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import {
  listAllPages,
  makePagedInformer,
  startInformer,
} from '../../controller/store/kubernetes/informers.ts';
import { admin, newSession, pending, routerSpec, user } from '../store/fixtures.ts';
import { useApiServer } from './apiserver.ts';

const server = useApiServer({ listFromCacheSnapshot: false });

async function routers(api: KubeApi, count: number, from = 1): Promise<void> {
  for (let i = from; i < from + count; i++) {
    const { agentTokenSha256: _none, ...spec } = routerSpec(i);
    await api.create<RouterSpec, RouterStatus>('Router', {
      apiVersion: GROUP_VERSION,
      kind: 'Router',
      metadata: { name: `r${i}` },
      spec,
    });
  }
}

async function until(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the store informers', () => {
  it('list every page, at one resourceVersion, without managedFields', async () => {
    const namespace = await server.createNamespace('pages');
    const api = new KubeApi(server.kubeConfig(), namespace);
    await routers(api, 7);
    const pages: (string | undefined)[] = [];
    const list = await listAllPages<KubernetesObject>((limit, next) => {
      pages.push(next);
      return api.listPage('Router', limit, next);
    }, 3);
    expect(pages).toHaveLength(3);
    expect(pages[0]).toBeUndefined();
    expect(list.items.map((r) => r.metadata?.name).sort()).toEqual([
      'r1',
      'r2',
      'r3',
      'r4',
      'r5',
      'r6',
      'r7',
    ]);
    expect(list.metadata?.resourceVersion).toMatch(/^\d+$/);
    for (const item of list.items) expect(item.metadata?.managedFields).toBeUndefined();
    // the API server has them: they are dropped on the way in
    expect((await api.get('Router', 'r1'))?.metadata.managedFields?.length).toBeGreaterThan(0);
  });

  it('start the list over when a continue token has expired (410 after an etcd compaction)', async () => {
    const namespace = await server.createNamespace('expired');
    const api = new KubeApi(server.kubeConfig(), namespace);
    await routers(api, 5);
    const pages: (string | undefined)[] = [];
    let compacted = false;
    const list = await listAllPages<KubernetesObject>(async (limit, next) => {
      pages.push(next);
      if (next !== undefined && !compacted) {
        // between two pages: a write, then the compaction etcd does every 5 minutes in a cluster
        compacted = true;
        await routers(api, 1, 6);
        await server.compactEtcd();
      }
      return api.listPage('Router', limit, next);
    }, 2);
    // the second page failed with 410; the list started over (a second first page) and read to the end
    expect(pages.filter((p) => p === undefined)).toHaveLength(2);
    expect(pages[1]).toBeDefined();
    expect(pages[2]).toBeUndefined();
    expect(list.items.map((r) => r.metadata?.name).sort()).toEqual(['r1', 'r2', 'r3', 'r4', 'r5', 'r6']);
  });

  it('follow the watch from the paged list, watched objects without managedFields too', async () => {
    const namespace = await server.createNamespace('watch');
    const api = new KubeApi(server.kubeConfig(), namespace);
    await routers(api, 5);
    const informer = makePagedInformer<KubernetesObject>(
      server.kubeConfig(),
      api.path('Router'),
      (limit, next) => api.listPage('Router', limit, next),
      { pageSize: 2 },
    );
    const added: KubernetesObject[] = [];
    informer.on('add', (obj) => added.push(obj));
    await startInformer(informer);
    try {
      expect(informer.list(namespace)).toHaveLength(5);
      await routers(api, 2, 6);
      await until('the watch delivers r6 and r7', () => added.length === 7);
      expect(added.map((r) => r.metadata?.name).slice(5)).toEqual(['r6', 'r7']);
      for (const obj of [...added, ...informer.list(namespace)])
        expect(obj.metadata?.managedFields).toBeUndefined();
    } finally {
      await informer.stop();
    }
  });

  it("leave the API server's managedFields in place when the store writes an object back", async () => {
    const namespace = await server.createNamespace('managed');
    const store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace });
    await store.start();
    try {
      await store.createRouter('fra1', routerSpec(1), admin);
      const session = await store.createSession(newSession(64512, 'fra1'), pending, user(64512), 'create');
      await store.updateSession(
        session.spec.uuid,
        (s) => ({ spec: { ...s.spec, mtu: 1400 } }),
        admin,
        'modify',
      );
      const stored = await new KubeApi(server.kubeConfig(), namespace).get('PeeringSession', session.name);
      expect(stored?.spec).toMatchObject({ mtu: 1400 });
      const managers = stored?.metadata.managedFields?.map((f) => `${f.manager}/${f.subresource ?? ''}`);
      // one manager: a session's spec and status are one write (docs/kubernetes.md, "One write per change")
      expect(managers).toEqual(['peerops-controller/']);
    } finally {
      await store.close();
    }
  });
});
