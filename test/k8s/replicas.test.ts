/**
 * Two controller replicas on one API server: each has its own KubeConfig and clients, its own store and
 * its own LeaderElector, as two pods would.
 */
import { randomUUID } from 'node:crypto';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { isProblem, type DomainError } from '../../common/errors.ts';
import { LeaderElector, createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { admin, newSession, pending, routerSpec, user } from '../store/fixtures.ts';
import { useApiServer } from './apiserver.ts';

const server = useApiServer();

async function replicas(namespace: string): Promise<[Store, Store]> {
  const stores = [0, 1].map((): Store =>
    createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace, flushIntervalMs: 200 }),
  ) as [Store, Store];
  await Promise.all(stores.map((s) => s.start()));
  return stores;
}

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('two controller replicas', () => {
  it('let exactly one of 20 concurrent creates for one (ASN, router) win, spread over both', async () => {
    const namespace = await server.createNamespace('replicas');
    const [a, b] = await replicas(namespace);
    try {
      await a.createRouter('fra1', routerSpec(1), admin);
      await until('replica b sees the router', () => b.getRouter('fra1') !== undefined, 5000);
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 === 0 ? a : b).createSession(newSession(64512, 'fra1'), pending, user(64512), 'create'),
        ),
      );
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
      for (const r of results)
        if (r.status === 'rejected')
          expect(isProblem(r.reason, 'SESSION_EXISTS'), String(r.reason)).toBe(true);
      await until('both replicas see one session', () => b.listSessions().length === 1, 5000);
      expect(a.listSessions()).toHaveLength(1);
      expect(a.listSessions()[0]?.spec.uuid).toBe(b.listSessions()[0]?.spec.uuid);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('keep listen ports unique per router when both create sessions at once', async () => {
    const namespace = await server.createNamespace('ports');
    const [a, b] = await replicas(namespace);
    try {
      await a.createRouter('fra1', routerSpec(1), admin);
      await until('replica b sees the router', () => b.getRouter('fra1') !== undefined, 5000);
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 === 0 ? a : b).createSession(newSession(64600 + i, 'fra1'), pending, user(64600 + i), 'c'),
        ),
      );
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
      await until(
        'both replicas see 20 sessions',
        () => a.listSessions().length === 20 && b.listSessions().length === 20,
        5000,
      );
      const ports = a.listSessions().map((s) => s.spec.listenPort);
      expect(new Set(ports).size).toBe(20);
      expect(Math.max(...ports)).toBe(30019);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('keep maxSessions and maxPendingPerAsn when both create sessions at once', async () => {
    const namespace = await server.createNamespace('limits');
    const [a, b] = await replicas(namespace);
    const codes = (results: PromiseSettledResult<unknown>[]) =>
      results.map((r) => (r.status === 'fulfilled' ? 'ok' : isProblem(r.reason) ? r.reason.code : 'thrown'));
    const stored = async () =>
      (
        (await server.kubeConfig().makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
          group: 'peerops.dev',
          version: 'v1alpha1',
          namespace,
          plural: 'peeringsessions',
        })) as { items: { spec: { router: string; asn: number } }[] }
      ).items;
    try {
      await a.createRouter('cap1', routerSpec(1, { maxSessions: 5 }), admin);
      const routers = ['pend1', 'pend2', 'pend3', 'pend4', 'pend5', 'pend6', 'pend7', 'pend8'];
      for (const [i, r] of routers.entries()) await a.createRouter(r, routerSpec(10 + i), admin);
      await a.putPolicy('default', { dn42Asn: 4242420000, maxPendingPerAsn: 2 }, admin);
      await until(
        'replica b sees the routers and policy',
        () => b.listRouters().length === 9 && b.getPolicy('default') !== undefined,
        5000,
      );
      // Each replica lets through as many as its own index allows; the re-check against the API server
      // takes back what another replica's creates pushed over (docs/kubernetes.md): never more than the limit.
      const capped = codes(
        await Promise.allSettled(
          Array.from({ length: 24 }, (_, i) =>
            (i % 2 === 0 ? a : b).createSession(newSession(64700 + i, 'cap1'), pending, user(64700 + i), 'c'),
          ),
        ),
      );
      const onCap = (await stored()).filter((s) => s.spec.router === 'cap1').length;
      expect(onCap).toBeLessThanOrEqual(5);
      expect(capped.filter((c) => c === 'ok')).toHaveLength(onCap);
      expect(capped.filter((c) => c !== 'ok' && c !== 'ROUTER_FULL')).toEqual([]);
      // what a race refused beyond the limit can be created afterwards, up to the limit exactly
      await until(
        'both replicas see the stored sessions',
        () => b.listSessions({ router: 'cap1' }).length === onCap,
        5000,
      );
      for (let i = onCap; i < 5; i++)
        await (i % 2 === 0 ? a : b).createSession(
          newSession(64800 + i, 'cap1'),
          pending,
          user(64800 + i),
          'c',
        );
      expect(
        codes(
          await Promise.allSettled([b.createSession(newSession(64899, 'cap1'), pending, user(64899), 'c')]),
        ),
      ).toEqual(['ROUTER_FULL']);
      expect((await stored()).filter((s) => s.spec.router === 'cap1')).toHaveLength(5);

      const asn = 4242420777;
      const pendingCodes = codes(
        await Promise.allSettled(
          routers.map((r, i) =>
            (i % 2 === 0 ? a : b).createSession(newSession(asn, r), pending, user(asn), 'c'),
          ),
        ),
      );
      const ofAsn = (await stored()).filter((s) => s.spec.asn === asn).length;
      expect(ofAsn).toBeLessThanOrEqual(2);
      expect(pendingCodes.filter((c) => c === 'ok')).toHaveLength(ofAsn);
      expect(pendingCodes.filter((c) => c !== 'ok' && c !== 'CONFLICT')).toEqual([]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('keep the agent token hash in a Secret, not on the Router, and both see it', async () => {
    const namespace = await server.createNamespace('tokens');
    const [a, b] = await replicas(namespace);
    try {
      await a.createRouter('fra1', { ...routerSpec(1), agentTokenSha256: 'd'.repeat(64) }, admin);
      await a.setAgentTokenHash('fra1', 'e'.repeat(64), admin);
      await until('replica b sees the new hash', () => b.getAgentTokenHash('fra1') === 'e'.repeat(64), 5000);
      expect(b.getRouter('fra1')?.spec.agentTokenSha256).toBe('e'.repeat(64));
      const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
      const stored = (await custom.getNamespacedCustomObject({
        group: 'peerops.dev',
        version: 'v1alpha1',
        namespace,
        plural: 'routers',
        name: 'fra1',
      })) as { spec: Record<string, unknown> };
      expect(stored.spec).not.toHaveProperty('agentTokenSha256');
      const secret = await server
        .kubeConfig()
        .makeApiClient(CoreV1Api)
        .readNamespacedSecret({ namespace, name: 'peerops-agent-token-fra1' });
      expect(Buffer.from(secret.data?.['sha256'] ?? '', 'base64').toString()).toBe('e'.repeat(64));
      await b.deleteRouter('fra1', admin);
      await until('replica a forgets the hash', () => a.getAgentTokenHash('fra1') === undefined, 5000);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('skip a port claimed by a create in flight, and take over a claim left by a crash', async () => {
    const namespace = await server.createNamespace('claims');
    const [a] = await replicas(namespace);
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    try {
      await a.createRouter('fra1', routerSpec(1), admin);
      // another replica claimed 30000 a moment ago and is about to create its session
      await core.createNamespacedConfigMap({
        namespace,
        body: { metadata: { name: 'peerops-port-fra1-30000' }, data: { session: 'as64999-fra1' } },
      });
      const first = await a.createSession(newSession(64512, 'fra1'), pending, user(64512), 'c');
      expect(first.spec.listenPort).toBe(30001);
    } finally {
      await a.close();
    }
    // a replica that treats claims without a session as stale at once takes 30000 over
    const b = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace, staleClaimSeconds: 0 });
    await b.start();
    try {
      const second = await b.createSession(newSession(64513, 'fra1'), pending, user(64513), 'c');
      expect(second.spec.listenPort).toBe(30000);
      const claim = await core.readNamespacedConfigMap({ namespace, name: 'peerops-port-fra1-30000' });
      expect(claim.data?.['session']).toBe('as64513-fra1');
      // deleting the session releases its claim
      await b.updateSession(second.spec.uuid, () => ({ delete: true }), admin, 'd');
      await expect(
        core.readNamespacedConfigMap({ namespace, name: 'peerops-port-fra1-30000' }),
      ).rejects.toMatchObject({ code: 404 });
    } finally {
      await b.close();
    }
  });

  it('let one of concurrent router adds with the same nodeId or uuid win, across both replicas', async () => {
    const namespace = await server.createNamespace('nodeids');
    const [a, b] = await replicas(namespace);
    try {
      // Each replica's own index check passes for all of these: none sees the others before they land.
      const sameNode = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          (i % 2 === 0 ? a : b).createRouter(`n${i}`, routerSpec(7), admin),
        ),
      );
      expect(sameNode.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of sameNode)
        if (r.status === 'rejected') {
          expect(isProblem(r.reason, 'CONFLICT'), String(r.reason)).toBe(true);
          expect((r.reason as DomainError).errors?.[0]?.pointer).toBe('/spec/nodeId');
        }
      const uuid = randomUUID();
      const sameUuid = await Promise.allSettled(
        Array.from({ length: 10 }, (_, i) =>
          (i % 2 === 0 ? a : b).createRouter(`u${i}`, routerSpec(100 + i, { uuid }), admin),
        ),
      );
      expect(sameUuid.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of sameUuid)
        if (r.status === 'rejected')
          expect((r.reason as DomainError).errors?.[0]?.pointer, String(r.reason)).toBe('/spec/uuid');
      await until(
        'both replicas see 2 routers',
        () => a.listRouters().length === 2 && b.listRouters().length === 2,
        5000,
      );
      expect(a.listRouters().filter((r) => r.spec.nodeId === 7)).toHaveLength(1);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('free a nodeId when its router moves to another or is removed; refuse one held by a write in flight', async () => {
    const namespace = await server.createNamespace('nodeid-moves');
    const [a, b] = await replicas(namespace);
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    const idsOf = async () =>
      (await core.readNamespacedConfigMap({ namespace, name: 'peerops-router-ids' })).data ?? {};
    try {
      await a.createRouter('fra1', routerSpec(1), admin);
      await b.createRouter('ams1', routerSpec(2), admin);
      // fra1 moves from nodeId 1 to 2, which ams1 holds: refused; to 3: 1 is free for ams1 at once
      await expect(a.updateRouter('fra1', (s) => ({ ...s, nodeId: 2 }), admin, 'm')).rejects.toMatchObject({
        code: 'CONFLICT',
      });
      await a.updateRouter('fra1', (s) => ({ ...s, nodeId: 3 }), admin, 'm');
      await until('replica b sees nodeId 3', () => b.getRouter('fra1')?.spec.nodeId === 3, 5000);
      await b.updateRouter('ams1', (s) => ({ ...s, nodeId: 1 }), admin, 'm');
      expect(
        Object.keys(await idsOf())
          .filter((k) => k.startsWith('node-'))
          .sort(),
      ).toEqual(['node-1', 'node-3']);
      // removing fra1 frees 3 for a new router on the other replica
      await until('replica a sees ams1 on nodeId 1', () => a.getRouter('ams1')?.spec.nodeId === 1, 5000);
      await a.deleteRouter('fra1', admin);
      await b.createRouter('par1', routerSpec(3), admin);
      // an entry written a moment ago by a replica about to create its router holds nodeId 9
      const ids = await core.readNamespacedConfigMap({ namespace, name: 'peerops-router-ids' });
      ids.data = { ...ids.data, 'node-9': JSON.stringify({ router: 'ghost', at: new Date().toISOString() }) };
      await core.replaceNamespacedConfigMap({ namespace, name: 'peerops-router-ids', body: ids });
      await expect(a.createRouter('lon1', routerSpec(9), admin)).rejects.toMatchObject({ code: 'CONFLICT' });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
    // a replica that treats such entries as stale at once (ghost was never created) takes nodeId 9
    const c = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace, staleClaimSeconds: 0 });
    await c.start();
    try {
      await c.createRouter('lon1', routerSpec(9), admin);
      expect(JSON.parse((await idsOf())['node-9'] ?? '{}')).toMatchObject({ router: 'lon1' });
    } finally {
      await c.close();
    }
  });

  it('take a router add back, identity included, when its token hash cannot be stored', async () => {
    const namespace = await server.createNamespace('router-rollback');
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    // an immutable Secret of that name: the store's replace of it fails
    await core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: 'peerops-agent-token-fra9' }, immutable: true, data: { sha256: 'eA==' } },
    });
    const [a] = await replicas(namespace);
    try {
      await expect(
        a.createRouter('fra9', { ...routerSpec(4), agentTokenSha256: 'f'.repeat(64) }, admin),
      ).rejects.toMatchObject({ message: expect.stringMatching(/the router was not added/) });
      expect(a.getRouter('fra9')).toBeUndefined();
      const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
      await expect(
        custom.getNamespacedCustomObject({
          group: 'peerops.dev',
          version: 'v1alpha1',
          namespace,
          plural: 'routers',
          name: 'fra9',
        }),
      ).rejects.toMatchObject({ code: 404 });
      // nodeId 4 is free again at once
      await a.createRouter('fra4', routerSpec(4), admin);
    } finally {
      await a.close();
    }
  });

  it('record the identities of routers written before the identity map, on start', async () => {
    const namespace = await server.createNamespace('nodeid-backfill');
    const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const spec = routerSpec(5);
    await custom.createNamespacedCustomObject({
      group: 'peerops.dev',
      version: 'v1alpha1',
      namespace,
      plural: 'routers',
      body: { apiVersion: 'peerops.dev/v1alpha1', kind: 'Router', metadata: { name: 'old1' }, spec },
    });
    const [a, b] = await replicas(namespace);
    try {
      const core = server.kubeConfig().makeApiClient(CoreV1Api);
      const ids = await core.readNamespacedConfigMap({ namespace, name: 'peerops-router-ids' });
      expect(JSON.parse(ids.data?.['node-5'] ?? '{}')).toMatchObject({ router: 'old1' });
      expect(JSON.parse(ids.data?.[`uuid-${spec.uuid}`] ?? '{}')).toMatchObject({ router: 'old1' });
      await expect(b.createRouter('new1', routerSpec(5), admin)).rejects.toMatchObject({ code: 'CONFLICT' });
      // entries edited by hand to a bare router name: held while that router has the identity, else free
      ids.data = { ...ids.data, 'node-5': 'old1', 'node-12': 'old1' };
      await core.replaceNamespacedConfigMap({ namespace, name: 'peerops-router-ids', body: ids });
      await expect(b.createRouter('new1', routerSpec(5), admin)).rejects.toMatchObject({ code: 'CONFLICT' });
      await b.createRouter('new1', routerSpec(12), admin);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('run the reconciler on one replica only; the other takes over within the lease duration', async () => {
    const namespace = await server.createNamespace('lease');
    const leaseDurationSeconds = 3;
    const leading = new Set<string>();
    const electors = ['replica-a', 'replica-b'].map(
      (identity) =>
        new LeaderElector({
          kubeConfig: server.kubeConfig(),
          namespace,
          name: 'peerops-controller',
          identity,
          leaseDurationSeconds,
          retryIntervalMs: 250,
          onStartedLeading: () => void leading.add(identity),
          onStoppedLeading: () => void leading.delete(identity),
        }),
    );
    try {
      for (const e of electors) e.start();
      await until('a leader', () => leading.size === 1, 10_000);
      // both keep running a while: never two leaders
      for (let i = 0; i < 20; i++) {
        expect(leading.size).toBe(1);
        await new Promise((r) => setTimeout(r, 100));
      }
      const [leader] = [...leading];
      const old = electors.find((e) => e.isLeader);
      const other = electors.find((e) => !e.isLeader);
      if (!old || !other) throw new Error('expected one leader and one candidate');
      // the leader dies: it stops renewing and does not hand the lease back
      const killedAt = Date.now();
      await old.stop({ release: false });
      await until('the other replica leads', () => other.isLeader, (leaseDurationSeconds + 2) * 1000);
      const takeover = Date.now() - killedAt;
      console.log(
        `leader ${leader} killed; the other replica took over after ${takeover} ms (lease ${leaseDurationSeconds} s)`,
      );
      // at most the lease duration after its last renewal, plus one retry interval and API latency
      expect(takeover).toBeLessThanOrEqual(leaseDurationSeconds * 1000 + 2000);
      expect(leading.size).toBe(1);
      // a graceful stop hands the lease back at once
      const restarted = new LeaderElector({
        kubeConfig: server.kubeConfig(),
        namespace,
        name: 'peerops-controller',
        identity: 'replica-c',
        leaseDurationSeconds,
        retryIntervalMs: 250,
        onStartedLeading: () => void leading.add('replica-c'),
        onStoppedLeading: () => void leading.delete('replica-c'),
      });
      electors.push(restarted);
      restarted.start();
      const releasedAt = Date.now();
      await other.stop();
      await until('replica-c leads', () => restarted.isLeader, 2000);
      console.log(`lease released on stop; replica-c took over after ${Date.now() - releasedAt} ms`);
    } finally {
      await Promise.all(electors.map((e) => e.stop()));
    }
  });
});
