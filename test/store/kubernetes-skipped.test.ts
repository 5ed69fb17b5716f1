/**
 * The Kubernetes store never stops on an object it cannot index (docs/store.md, "What the store
 * refuses"): against a real kube-apiserver without the admission webhook, a PeeringSession the CRD's
 * schema lets in but the API's schema refuses (a link-local address that is not link-local) and one with
 * a damaged initial-status annotation are skipped with their reasons, the rest is served, and a fixed or
 * deleted object leaves the list. A session without ipv6 is skipped unless it was adopted (under a CRD
 * from before the API server refused it).
 */
import { randomUUID } from 'node:crypto';
import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Store } from '../../controller/store/store.ts';
import { TOOLS_BUILD_TIMEOUT_MS, useApiServer } from '../k8s/apiserver.ts';
import { admin, newSession, routerSpec } from './fixtures.ts';
import { eventually } from './git-helpers.ts';

const server = useApiServer();
let store: Store;
let custom: CustomObjectsApi;
let namespace: string;

const ref = () => ({ group: 'peerops.dev', version: 'v1alpha1', namespace, plural: 'peeringsessions' });

/** A PeeringSession as kubectl would apply it, past no webhook. */
function sessionObject(
  asn: number,
  extra: Record<string, unknown> = {},
  annotations?: Record<string, string>,
) {
  return {
    apiVersion: 'peerops.dev/v1alpha1',
    kind: 'PeeringSession',
    metadata: { name: `as${asn}-fra1`, ...(annotations ? { annotations } : {}) },
    spec: { ...newSession(asn, 'fra1'), uuid: randomUUID(), listenPort: 30000 + (asn % 1000), ...extra },
  };
}

const skippedPaths = () => store.skippedManifests?.().manifests.map((m) => m.path) ?? [];

beforeAll(async () => {
  namespace = await server.createNamespace('skipped');
  custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
  store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace });
  await store.start();
  await store.createRouter('fra1', routerSpec(1), admin);
}, TOOLS_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await store?.close();
});

describe('kubernetes store: objects it cannot index', () => {
  it('skips them with their reasons and serves the rest', async () => {
    await custom.createNamespacedCustomObject({ ...ref(), body: sessionObject(4242420001) });
    await custom.createNamespacedCustomObject({
      ...ref(),
      body: sessionObject(4242420002, { linkLocal: 'fd00::2' }),
    });
    await custom.createNamespacedCustomObject({
      ...ref(),
      body: sessionObject(4242420003, {}, { 'peerops.dev/initial-status': '{' }),
    });
    await eventually(() => store.listSessions({ asn: 4242420001 }).length === 1);
    await eventually(() => skippedPaths().length === 2);

    const { manifests, since } = store.skippedManifests?.() ?? { manifests: [], since: '' };
    expect(manifests).toEqual([
      {
        path: 'peeringsessions/as4242420002-fra1',
        reason: 'schema',
        errors: [
          {
            pointer: '/linkLocal',
            message: 'must be an IPv6 link-local address (fe80::/10)',
            key: 'field.format.link-local',
          },
        ],
      },
      {
        path: 'peeringsessions/as4242420003-fra1',
        reason: 'unreadable',
        errors: [
          {
            pointer: '/',
            message: expect.stringContaining('JSON') as string,
            key: 'field.unreadable',
            params: { reason: expect.stringContaining('JSON') as string },
          },
        ],
      },
    ]);
    expect(Date.now() - Date.parse(since)).toBeLessThan(60_000);
    expect(store.listSessions({ router: 'fra1' }).map((s) => s.spec.asn)).toEqual([4242420001]);
    expect(store.listRouters().map((r) => r.name)).toEqual(['fra1']);
  });

  it('takes a fixed object and forgets a deleted one', async () => {
    await custom.patchNamespacedCustomObject(
      { ...ref(), name: 'as4242420002-fra1', body: { spec: { linkLocal: 'fe80::2' } } },
      // a JSON merge patch, as kubectl patch --type merge sends
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await eventually(() => store.listSessions({ asn: 4242420002 }).length === 1);
    await custom.deleteNamespacedCustomObject({ ...ref(), name: 'as4242420003-fra1' });
    await eventually(() => skippedPaths().length === 0);
  });

  it("skips a session without the peer's DN42 IPv6 unless it was adopted (docs/api.md, Adoptions)", async () => {
    // the CRD of a release before the rule (Helm never upgrades CRDs): the current one refuses such an
    // object itself (test/k8s/adopted.test.ts), so the store's own check is what stands here
    await server
      .kubeConfig()
      .makeApiClient(ApiextensionsV1Api)
      .patchCustomResourceDefinition(
        {
          name: 'peeringsessions.peerops.dev',
          body: [
            {
              op: 'remove',
              path: '/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations',
            },
          ],
        },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      );
    const withoutIpv6 = (asn: number, extra: Record<string, unknown> = {}) => {
      const body = sessionObject(asn, extra);
      const { ipv6: _ipv6, ...spec } = body.spec;
      return { ...body, spec };
    };
    const adopted = {
      by: 'admin AS4242420000',
      at: '2026-11-28T12:00:00.000Z',
      interface: 'dn42-p5',
      protocols: ['p5_v6'],
      files: ['/etc/wireguard/dn42-p5.conf'],
    };
    // the API server takes the CRD's new schema within moments
    await eventually(() =>
      custom.createNamespacedCustomObject({ ...ref(), body: withoutIpv6(4242420004) }).then(
        () => true,
        () => false,
      ),
    );
    await custom.createNamespacedCustomObject({ ...ref(), body: withoutIpv6(4242420005, { adopted }) });
    await eventually(() => store.listSessions({ asn: 4242420005 }).length === 1);
    await eventually(() => skippedPaths().length === 1);
    expect(store.skippedManifests?.().manifests).toEqual([
      {
        path: 'peeringsessions/as4242420004-fra1',
        reason: 'schema',
        errors: [expect.objectContaining({ pointer: '/ipv6', key: 'field.ipv6UnlessAdopted' })],
      },
    ]);
    expect(store.listSessions({ asn: 4242420005 })[0]?.spec).not.toHaveProperty('ipv6');
    await custom.deleteNamespacedCustomObject({ ...ref(), name: 'as4242420004-fra1' });
    await eventually(() => skippedPaths().length === 0);
  });
});
