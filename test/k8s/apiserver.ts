/**
 * A real Kubernetes API server for the tests: etcd and kube-apiserver built from their Go modules by
 * scripts/k8s-tools.sh (cached in .cache/k8s-bin/), started on 127.0.0.1 with free ports and temp dirs,
 * a static admin token, the API server's own self-signed serving certificate and a fresh service-account
 * key. startApiServer() also installs the peerops CRDs; stop() kills both processes and removes the dirs.
 * A test file calls useApiServer() once at its top: one server for the file, stopped after its last hook.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { perFile } from '../support/per-file.ts';
import { freePort } from '../support/ports.ts';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  KubeConfig,
  loadYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';

const run = promisify(execFile);
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface Tools {
  dir: string;
  etcd: string;
  kubeApiserver: string;
  helm: string;
  kubectl: string;
}

/**
 * The first run on a fresh machine compiles kube-apiserver, etcd and helm (about 18 min on 2 cores, module
 * downloads included): the hooks that start the API server get this long instead of vitest's 600 s.
 */
export const TOOLS_BUILD_TIMEOUT_MS = 40 * 60_000;

let toolsPromise: Promise<Tools> | undefined;

/** Builds (first time, many minutes) or finds the cached binaries, and prints how long that took. */
export function k8sTools(): Promise<Tools> {
  toolsPromise ??= (async () => {
    const started = Date.now();
    const { stdout, stderr } = await run('bash', [join(ROOT, 'scripts', 'k8s-tools.sh')], {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024,
      timeout: TOOLS_BUILD_TIMEOUT_MS,
    });
    const dir = stdout.trim().split('\n').at(-1) ?? '';
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.log(`k8s tools ready in ${seconds}s: ${stderr.trim().split('\n').at(-1) ?? ''}`);
    return {
      dir,
      etcd: join(dir, 'etcd'),
      kubeApiserver: join(dir, 'kube-apiserver'),
      helm: join(dir, 'helm'),
      kubectl: join(dir, 'kubectl'),
    };
  })();
  return toolsPromise;
}

function startProcess(bin: string, args: string[], logFile: string[]): ChildProcess {
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const keep = (chunk: Buffer) => {
    logFile.push(chunk.toString());
    if (logFile.length > 400) logFile.splice(0, logFile.length - 400);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return child;
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, log: string[]) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline)
      throw new Error(`${what} not ready after ${timeoutMs} ms; last output:\n${log.join('').slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** The user the tests' stores and controllers act as. */
export const ADMIN_USER = 'peerops-test-admin';
/** A second user with the same rights: kubectl, Flux or Argo CD, which the admission webhook checks. */
export const WRITER_USER = 'peerops-test-writer';

export interface TestApiServer {
  url: string;
  token: string;
  /** The bearer token of WRITER_USER. */
  writerToken: string;
  tools: Tools;
  /** A fresh KubeConfig for the admin user (each caller gets its own client objects). */
  kubeConfig(): KubeConfig;
  /** Writes a kubeconfig file (for helm) and returns its path. */
  kubeconfigFile(): Promise<string>;
  /** Creates a namespace with a random name and returns it. */
  createNamespace(prefix: string): Promise<string>;
  /** A KubeConfig acting as ServiceAccount `name` (a token from the TokenRequest API), as a pod would. */
  serviceAccountKubeConfig(namespace: string, name: string): Promise<KubeConfig>;
  /** Compacts etcd to its current revision, as its periodic compaction would: older continue tokens expire. */
  compactEtcd(): Promise<void>;
  stop(): Promise<void>;
}

export async function startApiServer(
  options: {
    installCrds?: boolean;
    /**
     * false: continued lists are read from etcd, as before Kubernetes 1.34, instead of the watch cache's
     * snapshots, so that a compaction (compactEtcd) expires their continue tokens with 410.
     */
    listFromCacheSnapshot?: boolean;
  } = {},
): Promise<TestApiServer> {
  const tools = await k8sTools();
  const started = Date.now();
  const dir = await mkdtemp(join(tmpdir(), 'peerops-k8s-'));
  const [etcdPort, peerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const token = randomBytes(24).toString('hex');
  const writerToken = randomBytes(24).toString('hex');
  await writeFile(
    join(dir, 'tokens.csv'),
    `${token},${ADMIN_USER},1,"system:masters"\n${writerToken},${WRITER_USER},2,"system:masters"\n`,
    { mode: 0o600 },
  );
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  await writeFile(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  await writeFile(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

  const log: string[] = [];
  const etcd = startProcess(
    tools.etcd,
    [
      '--name=peerops-test',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdPort}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=peerops-test=http://127.0.0.1:${peerPort}`,
      // test data in a temp dir: durability does not matter, speed does
      '--unsafe-no-fsync',
      '--log-level=warn',
    ],
    log,
  );
  const processes: ChildProcess[] = [etcd];
  const stop = async () => {
    for (const child of processes.reverse()) await stopProcess(child);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitFor('etcd', async () => (await fetch(`http://127.0.0.1:${etcdPort}/health`)).ok, 30_000, log);
    const apiserver = startProcess(
      tools.kubeApiserver,
      [
        `--etcd-servers=http://127.0.0.1:${etcdPort}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${apiPort}`,
        `--cert-dir=${join(dir, 'certs')}`,
        `--token-auth-file=${join(dir, 'tokens.csv')}`,
        `--service-account-key-file=${join(dir, 'sa.pub')}`,
        `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
        '--service-account-issuer=https://kubernetes.default.svc',
        '--service-cluster-ip-range=10.96.0.0/24',
        '--authorization-mode=RBAC',
        '--allow-privileged=true',
        '--enable-priority-and-fairness=false',
        // A webhook named by Service is called at the Service's endpoints, not its cluster IP: the tests
        // run no endpoints, so such a call fails at once instead of leaving loopback for 10.96.0.0/24.
        '--enable-aggregator-routing=true',
        ...(options.listFromCacheSnapshot === false ? ['--feature-gates=ListFromCacheSnapshot=false'] : []),
        '--v=0',
      ],
      log,
    );
    processes.push(apiserver);
    const url = `https://127.0.0.1:${apiPort}`;
    /** A KubeConfig for this API server acting as `user` with its bearer token. */
    const configFor = (user: string, bearer: string, namespace: string) => {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'test', server: url, skipTLSVerify: true }],
        users: [{ name: user, token: bearer }],
        contexts: [{ name: 'test', cluster: 'test', user, namespace }],
        currentContext: 'test',
      });
      return kc;
    };
    const makeConfig = () => configFor('admin', token, 'default');
    await waitFor(
      'kube-apiserver',
      async () => {
        if (apiserver.exitCode !== null) throw new Error('kube-apiserver exited');
        const core = makeConfig().makeApiClient(CoreV1Api);
        await core.readNamespace({ name: 'default' });
        return true;
      },
      120_000,
      log,
    );
    if (options.installCrds !== false) await installCrds(makeConfig());
    console.log(
      `test API server ready in ${((Date.now() - started) / 1000).toFixed(1)}s at ${url}; ` +
        `the first Kubernetes test starts ${process.uptime().toFixed(1)}s after this test process started (tool build included)`,
    );
    return {
      url,
      token,
      writerToken,
      tools,
      kubeConfig: makeConfig,
      async kubeconfigFile() {
        const file = join(dir, 'kubeconfig');
        await writeFile(file, makeConfig().exportConfig(), { mode: 0o600 });
        return file;
      },
      async serviceAccountKubeConfig(namespace: string, name: string) {
        const request = await makeConfig()
          .makeApiClient(CoreV1Api)
          .createNamespacedServiceAccountToken({
            name,
            namespace,
            body: { spec: { audiences: [], expirationSeconds: 3600 } },
          });
        const saToken = request.status?.token;
        if (!saToken) throw new Error(`no token for service account ${namespace}/${name}`);
        return configFor(name, saToken, namespace);
      },
      async compactEtcd() {
        // etcd's gRPC gateway: the current revision from any range answer's header, then compact to it
        const etcdUrl = `http://127.0.0.1:${etcdPort}/v3/kv`;
        const post = async (what: string, body: unknown) => {
          const answer = await fetch(`${etcdUrl}/${what}`, { method: 'POST', body: JSON.stringify(body) });
          if (!answer.ok) throw new Error(`etcd ${what}: ${answer.status} ${await answer.text()}`);
          return (await answer.json()) as { header?: { revision?: string } };
        };
        const { header } = await post('range', { key: Buffer.from('/').toString('base64') });
        await post('compaction', { revision: header?.revision, physical: true });
      },
      async createNamespace(prefix: string) {
        const name = `${prefix}-${randomBytes(4).toString('hex')}`;
        await makeConfig()
          .makeApiClient(CoreV1Api)
          .createNamespace({ body: { metadata: { name } } });
        return name;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** One API server for the calling test file, started and stopped by its hooks (test/support/per-file.ts). */
export function useApiServer(options: Parameters<typeof startApiServer>[0] = {}): TestApiServer {
  return perFile(
    () => startApiServer(options),
    (server) => server.stop(),
    TOOLS_BUILD_TIMEOUT_MS,
  );
}

/** Applies crds/*.yaml and waits until each is Established. */
export async function installCrds(kc: KubeConfig, dir = join(ROOT, 'crds')): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort()) {
    // the client's own loader: a plain object would lose `x-kubernetes-validations` in its serializer
    const crd = loadYaml<V1CustomResourceDefinition>(await readFile(join(dir, file), 'utf8'));
    await api.createCustomResourceDefinition({ body: crd });
    const name = crd.metadata?.name ?? '';
    const deadline = Date.now() + 30_000;
    for (;;) {
      const current = await api.readCustomResourceDefinition({ name });
      if (current.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} not established after 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
