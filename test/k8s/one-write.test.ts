/**
 * A session's spec and status change in one write (docs/kubernetes.md, "One write per change"), on a
 * real kube-apiserver + etcd (test/k8s/apiserver.ts): a watch of its own (as another replica's informer or
 * kubectl reads) never sees a modify's spec without its status; and a modify the API server refuses (a
 * ValidatingAdmissionPolicy denying the new status with the new spec, where the status write used to be
 * the second call) leaves the object, its generation and every reader as they were.
 */
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CustomObjectsApi,
  Watch,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { isProblem } from '../../common/errors.ts';
import type { SessionSpec, SessionStatusRecord } from '../../common/schema.ts';
import { SessionStatus } from '../../common/status.ts';
import { createKubernetesStore, type KubernetesStore } from '../../controller/store/kubernetes/index.ts';
import type { Session, SessionChange } from '../../controller/store/store.ts';
import { admin, newSession, queued, routerSpec } from '../store/fixtures.ts';
import { useApiServer } from './apiserver.ts';

/** Modifies watched; each a spec and a status change together. */
const MODIFIES = Number(process.env['ONE_WRITE_MODIFIES'] ?? 40);
const BASE = Date.parse('2026-01-01T00:00:00Z');

const server = useApiServer();

interface Stored extends KubernetesObject {
  metadata: { name: string; generation: number; resourceVersion: string };
  spec: SessionSpec;
  status?: SessionStatusRecord & { observedGeneration?: number };
}

const group = { group: 'peerops.dev', version: 'v1alpha1', plural: 'peeringsessions' };

async function storeIn(namespace: string): Promise<KubernetesStore> {
  const store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace, flushIntervalMs: 200 });
  await store.start();
  await store.putPolicy('default', { dn42Asn: 4242420000 }, admin);
  await store.createRouter('fra1', routerSpec(1), admin);
  return store;
}

/** The i-th modify: MTU 1300 + i and a status whose lastTransitionTime says i. */
function modify(i: number): (s: Session) => SessionChange {
  return (s) => ({
    spec: { ...s.spec, mtu: 1300 + i },
    status: {
      ...s.status,
      code: i % 2 === 0 ? SessionStatus.ACTIVE : SessionStatus.ERROR,
      name: i % 2 === 0 ? 'ACTIVE' : 'ERROR',
      lastTransitionTime: new Date(BASE + i * 1000).toISOString(),
    },
  });
}

describe('a session write on the Kubernetes store', () => {
  it(`shows a watcher each of ${MODIFIES} modifies' spec and status together, never one alone`, async () => {
    const namespace = await server.createNamespace('one-write');
    const store = await storeIn(namespace);
    const seen: Stored[] = [];
    const watch = await new Watch(server.kubeConfig()).watch(
      `/apis/peerops.dev/v1alpha1/namespaces/${namespace}/peeringsessions`,
      {},
      (phase, obj: Stored) => {
        if (phase === 'ADDED' || phase === 'MODIFIED') seen.push(obj);
      },
      () => undefined,
    );
    try {
      const session = await store.createSession(newSession(4242420031, 'fra1'), queued, admin, 'create');
      for (let i = 0; i < MODIFIES; i++)
        await store.updateSession(session.spec.uuid, modify(i), admin, `m${i}`);
      const last = 1300 + MODIFIES - 1;
      const deadline = Date.now() + 10_000;
      while (!seen.some((o) => o.spec.mtu === last) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20));
      const modified = seen.filter((o) => o.spec.mtu !== 1420);
      // every version written: the watch may coalesce none here, one object written in turn
      expect(modified.length).toBeGreaterThanOrEqual(MODIFIES);
      for (const o of seen) {
        expect(o.status?.observedGeneration, `${o.metadata.resourceVersion}`).toBe(o.metadata.generation);
        if (o.spec.mtu === 1420) expect(o.status?.name).toBe('QUEUED_FOR_SETUP');
        else expect(Date.parse(o.status?.lastTransitionTime ?? '') - BASE).toBe((o.spec.mtu - 1300) * 1000);
      }
      console.log(
        `one write: ${seen.length} versions watched over ${MODIFIES} modifies, 0 with a spec without its status`,
      );
    } finally {
      watch.abort();
      await store.close();
    }
  });

  it('leaves nothing of a modify the API server refuses: spec, status, generation, every reader', async () => {
    const namespace = await server.createNamespace('refused');
    const store = await storeIn(namespace);
    const admission = server.kubeConfig().makeApiClient(AdmissionregistrationV1Api);
    const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const policy = `refuse-error-at-1401-${namespace}`;
    try {
      const session = await store.createSession(newSession(4242420032, 'fra1'), queued, admin, 'create');
      await store.updateSession(session.spec.uuid, modify(120), admin, 'up at 1420'); // MTU 1420, ACTIVE
      // the API server refuses a session at MTU 1401 in ERROR: the status half of the modify below
      await admission.createValidatingAdmissionPolicy({
        body: {
          metadata: { name: policy },
          spec: {
            failurePolicy: 'Fail',
            matchConstraints: {
              resourceRules: [
                {
                  apiGroups: ['peerops.dev'],
                  apiVersions: ['v1alpha1'],
                  operations: ['UPDATE'],
                  resources: ['peeringsessions', 'peeringsessions/status'],
                },
              ],
            },
            validations: [
              {
                expression:
                  '!has(object.status) || !has(object.status.code) || !(object.spec.mtu == 1401 && object.status.code == 2)',
                message: 'refused by the test: MTU 1401 in ERROR',
              },
            ],
          },
        },
      });
      await admission.createValidatingAdmissionPolicyBinding({
        body: {
          metadata: { name: policy },
          spec: {
            policyName: policy,
            validationActions: ['Deny'],
            matchResources: {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
            },
          },
        },
      });
      const read = async () =>
        (await custom.getNamespacedCustomObject({ ...group, namespace, name: session.name })) as Stored;
      const before = await read();
      expect(before.spec.mtu).toBe(1420);
      // the policy is in force once the API server refuses a dry run of the refused state
      const deadline = Date.now() + 20_000;
      for (;;) {
        const refused = await custom
          .replaceNamespacedCustomObject({
            ...group,
            namespace,
            name: session.name,
            dryRun: 'All',
            body: { ...before, spec: { ...before.spec, mtu: 1401 }, status: { ...before.status, code: 2 } },
          })
          .then(() => false)
          .catch(() => true);
        if (refused) break;
        if (Date.now() > deadline) throw new Error('the admission policy never came into force');
        await new Promise((r) => setTimeout(r, 200));
      }

      const refusal = await store
        .updateSession(session.spec.uuid, modify(101), admin, 'MTU 1401, ERROR')
        .then(() => undefined)
        .catch((err: unknown) => err);
      expect(isProblem(refusal, 'INVALID_REQUEST'), String(refusal)).toBe(true);
      const after = await read();
      expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
      expect(after.metadata.generation).toBe(before.metadata.generation);
      expect(after.spec).toEqual(before.spec);
      expect(after.status).toEqual(before.status);
      const served = store.getSession(session.spec.uuid);
      expect(served?.spec.mtu).toBe(1420);
      expect(served?.status.name).toBe('ACTIVE');
      // a modify the policy lets through is written whole
      await store.updateSession(session.spec.uuid, modify(103), admin, 'MTU 1403, ERROR');
      expect((await read()).spec.mtu).toBe(1403);
      expect((await read()).status?.name).toBe('ERROR');
    } finally {
      await admission.deleteValidatingAdmissionPolicyBinding({ name: policy }).catch(() => undefined);
      await admission.deleteValidatingAdmissionPolicy({ name: policy }).catch(() => undefined);
      await store.close();
    }
  });

  // last: it changes the CRD every test of this file's API server shares, and puts it back
  it('refuses to start under an older CRD with the status subresource, and says what to do', async () => {
    const namespace = await server.createNamespace('old-crd');
    const crds = server.kubeConfig().makeApiClient(ApiextensionsV1Api);
    const name = 'peeringsessions.peerops.dev';
    const setSubresource = async (on: boolean) => {
      const crd = await crds.readCustomResourceDefinition({ name });
      const version = crd.spec.versions[0];
      if (!version) throw new Error('no version');
      if (on) version.subresources = { status: {} };
      else delete version.subresources;
      await crds.replaceCustomResourceDefinition({ name, body: crd });
      const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
      const deadline = Date.now() + 20_000;
      for (;;) {
        const listed = await custom.getAPIResources({ group: 'peerops.dev', version: 'v1alpha1' });
        if (listed.resources.some((r) => r.name === 'peeringsessions/status') === on) return;
        if (Date.now() > deadline)
          throw new Error(`discovery still ${on ? 'without' : 'with'} the subresource`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    await setSubresource(true);
    try {
      const store = createKubernetesStore({ kubeConfig: server.kubeConfig(), namespace });
      const refusal = await store.start().then(
        () => undefined,
        (err: unknown) => err,
      );
      await store.close();
      expect(isProblem(refusal, 'STORE_UNAVAILABLE'), String(refusal)).toBe(true);
      expect(String(refusal)).toMatch(/older than this controller.*kubectl apply -f crds\//);
    } finally {
      await setSubresource(false);
    }
  });
});
