/**
 * `peerops serve` with PEEROPS_STORE=kubernetes, two processes on one API server as two pods would run:
 * both answer /health, one holds the reconciler Lease, and when it is killed (SIGKILL: no hand-back)
 * the other takes the Lease over within the lease duration.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { freePort } from '../support/ports.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, TOOLS_BUILD_TIMEOUT_MS, useApiServer } from './apiserver.ts';
import { waitForHealth } from '../support/health.ts';
import { waitFor } from '../support/netns.ts';

const server = useApiServer();
let dir: string;
const children: ChildProcess[] = [];
const LEASE_SECONDS = 2;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-k8s-serve-'));
}, TOOLS_BUILD_TIMEOUT_MS);
afterAll(async () => {
  for (const child of children)
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function serve(
  name: string,
  namespace: string,
  kubeconfig: string,
): Promise<{ child: ChildProcess; base: string; output: () => string }> {
  const port = await freePort();
  let output = '';
  const child = spawn(
    process.execPath,
    ['bin/peerops.ts', 'serve', '--listen', `127.0.0.1:${port}`, '--data', join(dir, name)],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        PEEROPS_STORE: 'kubernetes',
        PEEROPS_NAMESPACE: namespace,
        KUBECONFIG: kubeconfig,
        POD_NAME: name,
        PEEROPS_LEASE_DURATION_SECONDS: String(LEASE_SECONDS),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  const base = `http://127.0.0.1:${port}`;
  await waitForHealth(base, child, {
    name: `serve ${name}`,
    timeoutMs: 30_000,
    intervalMs: 100,
    output: () => output,
  });
  return { child, base, output: () => output };
}

describe('peerops serve on the Kubernetes store', () => {
  it('runs two replicas; the Lease holder reconciles and the other takes over when it dies', async () => {
    const namespace = await server.createNamespace('serve');
    const kubeconfig = await server.kubeconfigFile();
    const replicas = {
      a: await serve('replica-a', namespace, kubeconfig),
      b: await serve('replica-b', namespace, kubeconfig),
    };
    const leases = server.kubeConfig().makeApiClient(CoordinationV1Api);
    const holder = async () =>
      (await leases.readNamespacedLease({ name: 'peerops-controller', namespace }).catch(() => undefined))
        ?.spec?.holderIdentity;
    const waitHolder = async (check: (h: string | undefined) => boolean, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const h = await holder();
        if (check(h)) return h;
        if (Date.now() > deadline) throw new Error(`lease holder ${h} after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const first = await waitHolder((h) => h === 'replica-a' || h === 'replica-b', 10_000);
    for (const r of Object.values(replicas)) expect((await fetch(`${r.base}/health`)).status).toBe(200);

    const leader = first === 'replica-a' ? replicas.a : replicas.b;
    const other = first === 'replica-a' ? 'replica-b' : 'replica-a';
    const killedAt = Date.now();
    leader.child.kill('SIGKILL');
    await waitHolder((h) => h === other, (LEASE_SECONDS + 3) * 1000);
    console.log(
      `serve: ${first} killed, ${other} holds the lease after ${Date.now() - killedAt} ms (lease ${LEASE_SECONDS} s)`,
    );
    const survivor = first === 'replica-a' ? replicas.b : replicas.a;
    expect((await fetch(`${survivor.base}/health`)).status).toBe(200);
    // the log goes out in batches (controller/logger.ts), so the line may follow the Lease write by a moment
    await waitFor(
      'the survivor to log "started leading"',
      () => /started leading/.test(survivor.output()),
      5_000,
      50,
    );
  });
});
