/**
 * pooledConnections (controller/store/kubernetes/connections.ts) against the real test kube-apiserver. New
 * connections are counted on undici's own diagnostics channel, which every undici copy publishes to.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pooledConnections } from '../../controller/store/kubernetes/connections.ts';
import { TOOLS_BUILD_TIMEOUT_MS, useApiServer } from './apiserver.ts';

const server = useApiServer({ installCrds: false });
let dir: string;
let connections = 0;
const counted = () => connections++;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'peerops-connections-'));
  subscribe('undici:client:connected', counted);
}, TOOLS_BUILD_TIMEOUT_MS);
afterAll(async () => {
  unsubscribe('undici:client:connected', counted);
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The API server's serving certificate (PEM), to use as a CA file. */
function servingCertificate(): Promise<string> {
  const { hostname, port } = new URL(server.url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), rejectUnauthorized: false }, () => {
      resolve(socket.getPeerX509Certificate()?.toString() ?? '');
      socket.end();
    });
    socket.on('error', reject);
  });
}

/** New connections opened while `calls` API calls run one after the other. */
async function connectionsFor(api: CoreV1Api, calls: number): Promise<number> {
  const before = connections;
  for (let i = 0; i < calls; i++) await api.readNamespace({ name: 'default' });
  return connections - before;
}

describe('API server connections', () => {
  it('are shared by every call, where the library alone opens one per call', async () => {
    // the behaviour worked around: without the pool, ten calls are ten TCP and TLS handshakes
    expect(await connectionsFor(server.kubeConfig().makeApiClient(CoreV1Api), 10)).toBe(10);
    const kubeConfig = pooledConnections(server.kubeConfig());
    expect(pooledConnections(kubeConfig)).toBe(kubeConfig);
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const other = kubeConfig.makeApiClient(CoreV1Api);
    expect(await connectionsFor(core, 10)).toBe(1);
    expect(await connectionsFor(other, 10)).toBe(0);
  });

  it('start anew when the TLS material changes (a rotated CA file), then are shared again', async () => {
    const caFile = join(dir, 'ca.crt');
    const certificate = await servingCertificate();
    expect(certificate).toContain('BEGIN CERTIFICATE');
    await writeFile(caFile, certificate);
    const kubeConfig = pooledConnections(server.kubeConfig());
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('the test kubeconfig has no cluster');
    cluster.caFile = caFile;
    const core = kubeConfig.makeApiClient(CoreV1Api);
    expect(await connectionsFor(core, 5)).toBe(1);
    await writeFile(caFile, `${certificate}\n`);
    expect(await connectionsFor(core, 5)).toBe(1);
    expect(await connectionsFor(core, 5)).toBe(0);
  });
});
