/**
 * charts/peerops: helm lint, helm template (every optional part on), and each rendered object checked by
 * the test API server with a server-side dry run (apply), so schemas, RBAC rules and the CRDs are real.
 * The admission webhook's configuration is also installed for real (helm install/upgrade) on that server:
 * its certificate survives an upgrade, and the server sends it exactly the writes it should. With
 * webhook.certManager.enabled the certificate comes from cert-manager, checked as rendered (no cert-manager
 * runs here). With store=git (docs/kubernetes.md, "The git store in the chart"): one replica on a claim, the
 * forge's settings and secret files as the controller's config reads them, and the values the render refuses.
 * Monitoring (docs/kubernetes.md, "Monitoring"): the ServiceMonitor and PodMonitor against minimal stand-ins
 * of the Prometheus operator's CRDs (test/k8s/fixtures), the Grafana dashboard's ConfigMap, the agent probes.
 *
 * Over 500 lines: every optional part of the chart, each checked by the same API server fixture.
 */
import { execFile } from 'node:child_process';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
  type V1Deployment,
  type V1Secret,
  type V1Service,
  type V1ValidatingWebhookConfiguration,
} from '@kubernetes/client-node';
import { load, loadAll } from 'js-yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../controller/config.ts';
import { imageReference } from '../../scripts/build-image.ts';
import { routerSpec } from '../store/fixtures.ts';
import { installCrds, ROOT, TOOLS_BUILD_TIMEOUT_MS, useApiServer } from './apiserver.ts';

const run = promisify(execFile);
const CHART = join(ROOT, 'charts', 'peerops');
const VALUES = [
  'agent.enabled=true',
  'prometheusRule.enabled=true',
  'agent.configs.edge1.router=fra1',
  'config.adminAsns={4242420000}',
  'controller.replicas=3',
  'config.redisUrl=redis://redis:6379',
  'monitoring.serviceMonitor.enabled=true',
  'monitoring.podMonitor.enabled=true',
  'grafana.dashboard.enabled=true',
];

const server = useApiServer();
beforeAll(async () => {
  await installCrds(server.kubeConfig(), join(ROOT, 'test', 'k8s', 'fixtures'));
}, TOOLS_BUILD_TIMEOUT_MS);

async function helm(...args: string[]): Promise<string> {
  const { stdout } = await run(server.tools.helm, args, {
    cwd: ROOT,
    maxBuffer: 16 * 1024 * 1024,
    env: {
      ...process.env,
      HELM_CACHE_HOME: join(ROOT, '.cache', 'helm'),
      HELM_CONFIG_HOME: join(ROOT, '.cache', 'helm'),
    },
  });
  return stdout;
}

/** helm template with the defaults (the webhook on) and `--set`s (or other flags, given as is), parsed. */
async function renderChart(namespace: string, ...set: string[]): Promise<KubernetesObject[]> {
  const rendered = await helm(
    'template',
    'peerops',
    CHART,
    '--namespace',
    namespace,
    ...set.flatMap((v) => (v.startsWith('--') ? [v] : ['--set', v])),
  );
  return loadAll(rendered).filter((o): o is KubernetesObject => typeof o === 'object' && o !== null);
}

/** `helm template` with the `--set`s, only the named files of templates/, parsed. */
async function renderTemplates(set: string[], ...templates: string[]): Promise<unknown[]> {
  const out = await helm(
    'template',
    'peerops',
    CHART,
    ...set.flatMap((v) => ['--set', v]),
    ...templates.flatMap((t) => ['--show-only', `templates/${t}`]),
  );
  return loadAll(out);
}

/** The controller's ConfigMap data as the chart renders it with the `--set`s: the environment it reads. */
async function configMapData(...set: string[]): Promise<Record<string, string>> {
  const [configMap] = (await renderTemplates(set, 'configmap.yaml')) as { data?: Record<string, string> }[];
  return configMap?.data ?? {};
}

/**
 * Server-side apply of each object as a dry run: the server validates and admits without storing. The client
 * puts the namespaced objects (it asks the server's discovery which are) in the namespace; CRDs and the
 * ValidatingWebhookConfiguration are cluster-scoped.
 */
async function dryRunApply(namespace: string, objects: KubernetesObject[]): Promise<void> {
  const kc = server.kubeConfig();
  kc.contexts = kc.contexts.map((c) => ({ ...c, namespace }));
  const client = KubernetesObjectApi.makeApiClient(kc);
  for (const object of objects) {
    const checked = await client
      .patch(object, undefined, 'All', 'peerops-chart-test', true, PatchStrategy.ServerSideApply)
      .catch((err: unknown) => {
        throw new Error(
          `${object.kind} ${object.metadata?.name} refused: ${String((err as { body?: unknown }).body ?? err)}`,
        );
      });
    expect(checked.metadata?.name).toBe(object.metadata?.name);
  }
}

interface CertificateSpec {
  secretName: string;
  dnsNames: string[];
  issuerRef: { name: string; kind: string; group: string };
}

function only<T extends KubernetesObject>(objects: KubernetesObject[], kind: string): T {
  const found = objects.filter((o) => o.kind === kind);
  expect(found, kind).toHaveLength(1);
  return found[0] as T;
}

/** Installs (or upgrades) release peerops in namespace on the test API server, with `--set`s. */
async function install(verb: 'install' | 'upgrade', namespace: string, ...set: string[]): Promise<void> {
  // useApiServer() installed the CRDs already
  await helm(
    verb,
    'peerops',
    CHART,
    '--namespace',
    namespace,
    '--kubeconfig',
    await server.kubeconfigFile(),
    '--skip-crds',
    ...set.flatMap((v) => ['--set', v]),
  );
}

describe('charts/peerops', () => {
  it('passes helm lint with the defaults and with every optional part on', async () => {
    expect(await helm('lint', CHART)).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    expect(await helm('lint', CHART, ...VALUES.flatMap((v) => ['--set', v]))).toMatch(/0 chart\(s\) failed/);
  });

  it('renders manifests the API server accepts (server-side dry run)', async () => {
    const namespace = await server.createNamespace('chart');
    const objects = await renderChart(namespace, '--include-crds', ...VALUES);
    const kinds = objects.map((o) => o.kind).sort();
    expect(kinds).toEqual([
      'ConfigMap',
      'ConfigMap',
      'CustomResourceDefinition',
      'CustomResourceDefinition',
      'CustomResourceDefinition',
      'DaemonSet',
      'DaemonSet',
      'Deployment',
      'Lease',
      'PodMonitor',
      'PrometheusRule',
      'Role',
      'RoleBinding',
      'Secret',
      'Secret',
      'Secret',
      'Service',
      'Service',
      'ServiceAccount',
      'ServiceMonitor',
      'ValidatingWebhookConfiguration',
    ]);
    await dryRunApply(namespace, objects);

    const deployment = objects.find((o) => o.kind === 'Deployment') as KubernetesObject & {
      spec: {
        replicas: number;
        template: {
          spec: {
            containers: Record<
              'livenessProbe' | 'readinessProbe',
              { httpGet: { path: string }; timeoutSeconds: number }
            >[];
          };
        };
      };
    };
    expect(deployment.spec.replicas).toBe(3);
    const controller = deployment.spec.template.spec.containers[0];
    expect(controller?.livenessProbe.httpGet.path).toBe('/livez');
    // a connect burst holds the event loop past Kubernetes' default 1 s
    expect(controller?.livenessProbe.timeoutSeconds).toBe(5);
    expect(controller?.readinessProbe.timeoutSeconds).toBe(5);
    const daemonSet = objects.find((o) => o.kind === 'DaemonSet') as KubernetesObject & {
      spec: {
        template: {
          spec: {
            hostNetwork: boolean;
            containers: { securityContext: { capabilities: { add: string[] } } }[];
          };
        };
      };
    };
    expect(daemonSet.spec.template.spec.hostNetwork).toBe(true);
    expect(daemonSet.spec.template.spec.containers[0]?.securityContext.capabilities.add).toContain(
      'NET_ADMIN',
    );
  });

  it('probes the agent: liveness on /livez, readiness on /health, both on loopback', async () => {
    type Probe = { httpGet: { host: string; path: string; port: string }; timeoutSeconds: number };
    const daemonSet = only<
      KubernetesObject & {
        spec: { template: { spec: { containers: { livenessProbe: Probe; readinessProbe: Probe }[] } } };
      }
    >(
      (await renderChart('default', ...VALUES)).filter(
        (o) => o.metadata?.labels?.['app.kubernetes.io/component'] === 'agent',
      ),
      'DaemonSet',
    );
    const agent = daemonSet.spec.template.spec.containers[0];
    // /health is 503 while BIRD or the controller is down: only readiness may look at it (docs/agent.md)
    expect(agent?.livenessProbe.httpGet).toEqual({ host: '127.0.0.1', path: '/livez', port: 'status' });
    expect(agent?.readinessProbe.httpGet).toEqual({ host: '127.0.0.1', path: '/health', port: 'status' });
    expect(agent?.livenessProbe.timeoutSeconds).toBe(5);
  });

  it('scrapes the controller (ServiceMonitor) and the agents (PodMonitor) only when asked', async () => {
    type Monitor = KubernetesObject & {
      spec: {
        selector: { matchLabels: Record<string, string> };
        endpoints?: { port: string; path: string }[];
        podMetricsEndpoints?: { port: string; path: string }[];
      };
    };
    const none = await renderChart('default', 'agent.enabled=true', 'agent.configs.edge1.router=fra1');
    expect(none.filter((o) => /Monitor$/.test(o.kind ?? ''))).toEqual([]);
    const objects = await renderChart('default', ...VALUES);
    const service = only<Monitor>(objects, 'ServiceMonitor');
    expect(service.spec.endpoints).toEqual([expect.objectContaining({ port: 'http', path: '/metrics' })]);
    // the API Service is the one with a port named http (the webhook's has the same labels)
    const apiService = objects.find(
      (o) => o.kind === 'Service' && (o as V1Service).spec?.ports?.some((p) => p.name === 'http'),
    ) as V1Service;
    expect(apiService.metadata?.labels).toMatchObject(service.spec.selector.matchLabels);
    const pod = only<Monitor>(objects, 'PodMonitor');
    expect(pod.spec.podMetricsEndpoints).toEqual([
      expect.objectContaining({ port: 'status', path: '/metrics' }),
    ]);
    expect(pod.spec.selector.matchLabels['app.kubernetes.io/component']).toBe('agent');
    // no agents, no PodMonitor
    const noAgents = await renderChart('default', 'monitoring.podMonitor.enabled=true');
    expect(noAgents.filter((o) => o.kind === 'PodMonitor')).toEqual([]);
  });

  it("ships files/dashboard.json unchanged in a ConfigMap labelled for Grafana's sidecar", async () => {
    const maps = (await renderChart('default')).filter((o) => o.kind === 'ConfigMap');
    expect(maps).toHaveLength(1);
    const dashboards = (await renderChart('default', 'grafana.dashboard.enabled=true')).filter(
      (o) => o.kind === 'ConfigMap' && o.metadata?.labels?.grafana_dashboard === '1',
    ) as (KubernetesObject & { data: Record<string, string> })[];
    expect(dashboards).toHaveLength(1);
    const json = await readFile(join(CHART, 'files', 'dashboard.json'), 'utf8');
    expect(JSON.parse(dashboards[0]?.data['peerops.json'] ?? '')).toEqual(JSON.parse(json));
  });

  it('wraps files/alerts.yaml in the PrometheusRule unchanged', async () => {
    const [rule] = (await renderTemplates(['prometheusRule.enabled=true'], 'prometheusrule.yaml')) as {
      spec: unknown;
    }[];
    const alerts = loadAll(await readFile(join(CHART, 'files', 'alerts.yaml'), 'utf8'))[0];
    expect(rule?.spec).toEqual(alerts);
  });

  it('pins clients to one replica without a shared Redis, and shares Redis when given', async () => {
    const render = async (...set: string[]) => {
      const objects = (await renderTemplates(set, 'service.yaml', 'configmap.yaml')) as {
        kind: string;
        spec?: { sessionAffinity?: string };
        data?: object;
      }[];
      return {
        service: objects.find((o) => o.kind === 'Service'),
        config: objects.find((o) => o.kind === 'ConfigMap')?.data as Record<string, string>,
      };
    };
    const alone = await render();
    expect(alone.service?.spec?.sessionAffinity).toBe('ClientIP');
    expect(alone.config).not.toHaveProperty('PEEROPS_REDIS_URL');
    const shared = await render('config.redisUrl=redis://redis:6379');
    expect(shared.service?.spec?.sessionAffinity).toBeUndefined();
    expect(shared.config.PEEROPS_REDIS_URL).toBe('redis://redis:6379');
    expect((await render('controller.replicas=1')).service?.spec?.sessionAffinity).toBeUndefined();
  });

  it("runs one agent DaemonSet per router node, pinned to it, mounting only that node's config", async () => {
    type AgentDaemonSet = {
      kind: string;
      metadata: { name: string };
      spec: {
        template: {
          spec: {
            nodeSelector: Record<string, string>;
            volumes: {
              name: string;
              secret?: { secretName: string; items?: { key: string; path: string }[] };
            }[];
          };
        };
      };
    };
    const render = async (...set: string[]) =>
      (
        (await renderTemplates(['agent.enabled=true', ...set], 'agent-daemonset.yaml')) as AgentDaemonSet[]
      ).filter((o) => o?.kind);
    const configOf = (d: AgentDaemonSet) =>
      d.spec.template.spec.volumes.find((v) => v.name === 'config')?.secret;
    // configs in values: a Secret per node holding only its config
    const own = await render('agent.configs.edge1.router=fra1', 'agent.configs.edge2.router=ams1');
    const secrets = own.filter((o) => o.kind === 'Secret') as unknown as {
      metadata: { name: string };
      data: Record<string, string>;
    }[];
    expect(secrets.map((x) => [x.metadata.name, Object.keys(x.data)])).toEqual([
      ['peerops-agent-edge1', ['agent.json']],
      ['peerops-agent-edge2', ['agent.json']],
    ]);
    expect(JSON.parse(Buffer.from(secrets[1]?.data['agent.json'] ?? '', 'base64').toString())).toEqual({
      router: 'ams1',
    });
    const sets = own.filter((o) => o.kind === 'DaemonSet');
    expect(
      sets.map((d) => [
        d.metadata.name,
        d.spec.template.spec.nodeSelector['kubernetes.io/hostname'],
        configOf(d)?.secretName,
      ]),
    ).toEqual([
      ['peerops-agent-edge1', 'edge1', 'peerops-agent-edge1'],
      ['peerops-agent-edge2', 'edge2', 'peerops-agent-edge2'],
    ]);
    expect(sets[0]?.spec.template.spec.nodeSelector['peerops.dev/router']).toBe('true');
    // an operator's Secret with every node's key: each DaemonSet mounts its own key only
    const shared = (await render('agent.configSecret=peerops-agents', 'agent.nodes={n1,n2}')).filter(
      (o) => o.kind === 'DaemonSet',
    );
    expect(shared.map((d) => configOf(d))).toEqual([
      { secretName: 'peerops-agents', defaultMode: 0o400, items: [{ key: 'n1.json', path: 'agent.json' }] },
      { secretName: 'peerops-agents', defaultMode: 0o400, items: [{ key: 'n2.json', path: 'agent.json' }] },
    ]);
  });

  it("defaults to the images npm run build:image builds; the WireGuard keeper shares the agent's run dir", async () => {
    type Container = {
      image: string;
      command?: string[];
      env?: { name: string; value: string }[];
      securityContext: { readOnlyRootFilesystem?: boolean; capabilities: { add: string[]; drop: string[] } };
      volumeMounts: { name: string; mountPath: string }[];
    };
    type Workload = KubernetesObject & {
      spec: {
        updateStrategy?: { type: string };
        template: {
          spec: { containers: Container[]; volumes: { name: string; hostPath?: { path: string } }[] };
        };
      };
    };
    const chart = load(await readFile(join(CHART, 'Chart.yaml'), 'utf8')) as { appVersion: string };
    const objects = (await renderChart('default', ...VALUES)) as Workload[];
    const component = (c: string) =>
      objects.filter(
        (o) =>
          ['Deployment', 'DaemonSet'].includes(o.kind ?? '') &&
          o.metadata?.labels?.['app.kubernetes.io/component'] === c,
      );
    const [controller] = component('controller');
    const [agent] = component('agent');
    const [keeper] = component('wireguard-keeper');
    expect(controller?.spec.template.spec.containers[0]?.image).toBe(
      imageReference('controller', chart.appVersion),
    );
    expect(agent?.spec.template.spec.containers[0]?.image).toBe(imageReference('agent', chart.appVersion));
    expect(keeper?.spec.template.spec.containers[0]?.image).toBe(imageReference('agent', chart.appVersion));
    // never rolled by an upgrade: its wireguard-go processes are the node's userspace tunnels
    expect(keeper?.spec.updateStrategy?.type).toBe('OnDelete');
    const keeperContainer = keeper!.spec.template.spec.containers[0]!;
    expect(keeperContainer.command).toEqual(['/usr/local/bin/node', '/opt/peerops/wireguard-keeper.ts']);
    expect(keeperContainer.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] },
    });
    const runDir = (w: Workload) => {
      const mount = w.spec.template.spec.containers[0]?.volumeMounts.find(
        (m) => m.mountPath === '/var/run/wireguard',
      );
      return w.spec.template.spec.volumes.find((v) => v.name === mount?.name)?.hostPath?.path;
    };
    expect(runDir(keeper!)).toBe('/var/run/wireguard');
    expect(runDir(agent!)).toBe('/var/run/wireguard');
    expect(agent?.spec.template.spec.containers[0]?.env).toContainEqual({
      name: 'PEEROPS_WIREGUARD_KEEPER',
      value: '1',
    });
    // without the keeper: no keeper, and the agent runs wireguard-go itself
    const off = (await renderChart(
      'default',
      ...VALUES,
      'agent.wireguardKeeper.enabled=false',
    )) as Workload[];
    expect(
      off.filter((o) => o.metadata?.labels?.['app.kubernetes.io/component'] === 'wireguard-keeper'),
    ).toEqual([]);
    const agentOff = off.find(
      (o) => o.metadata?.labels?.['app.kubernetes.io/component'] === 'agent' && o.kind === 'DaemonSet',
    );
    expect(agentOff?.spec.template.spec.containers[0]?.env ?? []).not.toContainEqual(
      expect.objectContaining({ name: 'PEEROPS_WIREGUARD_KEEPER' }),
    );
  });

  it('passes the log level to the controller', async () => {
    const level = async (...set: string[]) => (await configMapData(...set)).PEEROPS_LOG_LEVEL;
    expect(await level()).toBe('info');
    expect(await level('config.logLevel=debug')).toBe('debug');
  });

  it("sets the portal's idle timeout as the controller reads it", async () => {
    const idle = async (...set: string[]) => loadConfig({}, await configMapData(...set)).portalIdleSeconds;
    expect(await idle()).toBe(1800);
    expect(await idle('config.portalIdleTimeoutSeconds=7200')).toBe(7200);
    // out of range: the controller refuses to start, naming the setting
    await expect(idle('config.portalIdleTimeoutSeconds=30')).rejects.toThrow(/PEEROPS_PORTAL_IDLE_TIMEOUT/);
  });

  it("trusts a sidecar's and the pod network's proxies by default, as the controller reads the setting", async () => {
    const trust = async (...set: string[]) => loadConfig({}, await configMapData(...set)).trustProxy;
    expect(await trust()).toEqual(['loopback', 'uniquelocal']);
    expect(await trust('config.trustProxy=false')).toBe(false);
    expect(await trust('config.trustProxy=10.42.0.0/16')).toEqual(['10.42.0.0/16']);
  });

  it('points the webhook at the Service, the certificate the pods mount, and exempts the controller', async () => {
    const namespace = 'peerops-test';
    const objects = await renderChart(namespace);
    const config = only<V1ValidatingWebhookConfiguration>(objects, 'ValidatingWebhookConfiguration');
    const service = objects.find((o) => o.metadata?.name === 'peerops-webhook') as V1Service;
    const deployment = only<V1Deployment>(objects, 'Deployment');
    const serviceAccount = only(objects, 'ServiceAccount');
    const secret = objects.find((o) => o.metadata?.name === 'peerops-webhook-tls') as V1Secret;
    expect(config.metadata?.name).toBe(`peerops-${namespace}`);
    expect(config.webhooks).toHaveLength(1);
    const webhook = config.webhooks?.[0];
    expect(webhook).toMatchObject({
      name: 'validate.peerops.dev',
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      failurePolicy: 'Fail',
      timeoutSeconds: 5,
    });

    // the controller's own writes skip the webhook: its pods run as the rendered ServiceAccount
    const pod = deployment.spec?.template.spec;
    expect(pod?.serviceAccountName).toBe(serviceAccount.metadata?.name);
    expect(webhook?.matchConditions).toEqual([
      {
        name: 'not-the-controller',
        expression: `request.userInfo.username != 'system:serviceaccount:${namespace}:${serviceAccount.metadata?.name}'`,
      },
    ]);
    // every peerops resource, as the CRDs name it, on create and update only; not their /status
    const crds = (await Promise.all(
      (await readdir(join(CHART, 'crds'))).map(async (f) =>
        load(await readFile(join(CHART, 'crds', f), 'utf8')),
      ),
    )) as { spec: { group: string; names: { plural: string }; versions: { name: string }[] } }[];
    expect(webhook?.rules).toEqual([
      {
        apiGroups: [...new Set(crds.map((c) => c.spec.group))],
        apiVersions: [...new Set(crds.flatMap((c) => c.spec.versions.map((v) => v.name)))],
        resources: crds.map((c) => c.spec.names.plural).sort(),
        operations: ['CREATE', 'UPDATE'],
        scope: 'Namespaced',
      },
    ]);
    expect(webhook?.namespaceSelector).toEqual({ matchLabels: { 'kubernetes.io/metadata.name': namespace } });

    // the API server reaches the webhook through a Service port that leads to the container's webhook port
    const container = pod?.containers[0];
    const env = Object.fromEntries((container?.env ?? []).map((e) => [e.name, e.value]));
    const containerPort = container?.ports?.find((p) => p.name === 'webhook')?.containerPort;
    expect(env.PEEROPS_WEBHOOK_LISTEN).toBe(`:${containerPort}`);
    const target = webhook?.clientConfig.service;
    expect(target).toMatchObject({ name: service.metadata?.name, namespace, path: '/validate' });
    expect(service.spec?.ports?.find((p) => p.port === target?.port)?.targetPort).toBe('webhook');
    // a Service of its own, inside the cluster whatever service.type publishes the API with
    expect(service.spec?.type).toBe('ClusterIP');
    expect(service.spec?.selector).toEqual(
      only<V1Service>(
        objects.filter((o) => o !== service),
        'Service',
      ).spec?.selector,
    );

    // the certificate the pods mount at PEEROPS_WEBHOOK_CERT_DIR is for the Service, signed by the caBundle
    const mount = container?.volumeMounts?.find((m) => m.mountPath === env.PEEROPS_WEBHOOK_CERT_DIR);
    expect(pod?.volumes?.find((v) => v.name === mount?.name)?.secret?.secretName).toBe(secret.metadata?.name);
    expect(secret.type).toBe('kubernetes.io/tls');
    const pem = (key: string) => Buffer.from(secret.data?.[key] ?? '', 'base64');
    const ca = new X509Certificate(Buffer.from(webhook?.clientConfig.caBundle ?? '', 'base64'));
    const cert = new X509Certificate(pem('tls.crt'));
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(cert.checkPrivateKey(createPrivateKey(pem('tls.key')))).toBe(true);
    expect(cert.subjectAltName?.split(', ')).toContain(`DNS:${service.metadata?.name}.${namespace}.svc`);
    expect(pem('ca.crt').toString()).toBe(ca.toString());
  });

  it('has cert-manager issue the webhook certificate into the mounted Secret and inject its CA', async () => {
    const namespace = await server.createNamespace('chart-cert-manager');
    const objects = await renderChart(namespace, 'webhook.certManager.enabled=true');
    const config = only<V1ValidatingWebhookConfiguration>(objects, 'ValidatingWebhookConfiguration');
    const certificate = only<KubernetesObject & { spec: CertificateSpec }>(objects, 'Certificate');
    const issuer = only<KubernetesObject & { spec: unknown }>(objects, 'Issuer');
    const pod = only<V1Deployment>(objects, 'Deployment').spec?.template.spec;
    const service = objects.find((o) => o.metadata?.name === 'peerops-webhook') as V1Service;
    // no Secret from the chart (cert-manager writes it), no caBundle (cainjector writes it): every render
    // is the same, whatever the cluster holds
    expect(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata?.name)).toEqual(['peerops-jwt']);
    expect(config.webhooks?.[0]?.clientConfig.caBundle).toBeUndefined();
    expect(config.metadata?.annotations).toEqual({
      'cert-manager.io/inject-ca-from': `${namespace}/${certificate.metadata?.name}`,
    });
    // the Secret cert-manager fills is the one the pods mount; the certificate names the webhook Service
    const mounted = pod?.volumes?.find((v) => v.name === 'webhook-tls')?.secret?.secretName;
    expect(certificate.spec.secretName).toBe(mounted);
    expect(certificate.spec.dnsNames).toContain(`${service.metadata?.name}.${namespace}.svc`);
    expect(certificate.spec.issuerRef).toEqual({
      name: issuer.metadata?.name,
      kind: 'Issuer',
      group: 'cert-manager.io',
    });
    expect(issuer.spec).toEqual({ selfSigned: {} });
    // the API server accepts every object (cert-manager's kinds: stand-in CRDs in test/k8s/fixtures)
    await dryRunApply(namespace, objects);

    // an issuer of the operator's own: no Issuer from the chart
    const own = await renderChart(
      namespace,
      'webhook.certManager.enabled=true',
      'webhook.certManager.issuerRef.name=internal-ca',
      'webhook.certManager.issuerRef.kind=ClusterIssuer',
    );
    expect(own.map((o) => o.kind)).not.toContain('Issuer');
    expect(only<KubernetesObject & { spec: CertificateSpec }>(own, 'Certificate').spec.issuerRef).toEqual({
      name: 'internal-ca',
      kind: 'ClusterIssuer',
      group: 'cert-manager.io',
    });
  });

  it('renders no webhook, port or webhook settings with webhook.enabled=false', async () => {
    const objects = await renderChart('peerops-test', 'webhook.enabled=false');
    expect(objects.map((o) => o.kind)).not.toContain('ValidatingWebhookConfiguration');
    expect(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata?.name)).toEqual(['peerops-jwt']);
    expect(only<V1Service>(objects, 'Service').spec?.ports?.map((p) => p.name)).toEqual(['http']);
    const pod = only<V1Deployment>(objects, 'Deployment').spec?.template.spec;
    expect(pod?.containers[0]?.ports?.map((p) => p.name)).toEqual(['http']);
    expect(pod?.containers[0]?.env?.map((e) => e.name)).toEqual(['PEEROPS_NAMESPACE', 'POD_NAME']);
    expect(pod?.volumes?.map((v) => v.name)).toEqual(['jwt', 'data']);
  });

  // helm template has no cluster, so its lookup finds nothing and every render makes a new certificate:
  // keeping it across upgrades is only seen with helm install and upgrade on the API server.
  it('keeps the webhook certificate and its caBundle across helm upgrade', async () => {
    const namespace = await server.createNamespace('webhook-upgrade');
    const core = server.kubeConfig().makeApiClient(CoreV1Api);
    const admission = server.kubeConfig().makeApiClient(AdmissionregistrationV1Api);
    const installed = async () => ({
      tls: (await core.readNamespacedSecret({ name: 'peerops-webhook-tls', namespace })).data,
      caBundle: (await admission.readValidatingWebhookConfiguration({ name: `peerops-${namespace}` }))
        .webhooks?.[0]?.clientConfig.caBundle,
    });
    await install('install', namespace);
    const first = await installed();
    expect(first.caBundle).toBe(first.tls?.['ca.crt']);
    await install('upgrade', namespace);
    expect(await installed()).toEqual(first);
  });

  it("sends others' creates and updates in its namespace to the webhook (failing closed), not the controller's", async () => {
    const namespace = await server.createNamespace('webhook-admit');
    // no pods run on the test API server (no scheduler, no kubelet): the webhook is installed but never
    // answers, as in an outage
    await install('install', namespace);
    const admin = KubernetesObjectApi.makeApiClient(server.kubeConfig());
    const router = (ns: string) => ({
      apiVersion: 'peerops.dev/v1alpha1',
      kind: 'Router',
      metadata: { name: 'fra1', namespace: ns },
      spec: routerSpec(1),
    });
    // the API server's message, JSON-quoted in the client's error; the test API server looks a Service up
    // by its endpoints (there are none), so the call never leaves loopback
    const refused = /failed calling webhook \W*validate\.peerops\.dev.*endpoints/;
    // the API server picks the configuration up from its own watch: until it does, a create is stored (and
    // removed again here); after, the rest of the test sees the webhook in force
    const firstRefusal = async () => {
      for (const deadline = Date.now() + 15_000; Date.now() < deadline;) {
        const stored = await admin.create(router(namespace)).catch((err: Error) => err);
        if (stored instanceof Error) return stored.message;
        await admin.delete(stored);
        await new Promise((r) => setTimeout(r, 100));
      }
      return 'no create refused in 15 s';
    };
    expect(await firstRefusal()).toMatch(refused);

    // the controller, with a token of its ServiceAccount, writes without the webhook
    const kc = await server.serviceAccountKubeConfig(namespace, 'peerops');
    const created = await KubernetesObjectApi.makeApiClient(kc).create(router(namespace));
    await expect(admin.replace({ ...created, spec: routerSpec(2) })).rejects.toThrow(refused);

    // status, deletes and other namespaces are not the webhook's
    await server
      .kubeConfig()
      .makeApiClient(CustomObjectsApi)
      .replaceNamespacedCustomObjectStatus({
        group: 'peerops.dev',
        version: 'v1alpha1',
        namespace,
        plural: 'routers',
        name: 'fra1',
        body: { ...created, status: { lastHeartbeat: '2026-01-01T00:00:00.000Z' } },
      });
    await admin.delete(created);
    const other = await server.createNamespace('webhook-other');
    await admin.create(router(other));
  });

  describe('store=git', () => {
    const GIT = [
      'store=git',
      'git.remote=https://forge.example/net/peering.git',
      'git.branch=peering',
      'git.intervalSeconds=10',
      'git.credentialsSecret=forge-credentials',
      'git.webhookSecret=forge-webhook',
      'persistence.size=2Gi',
      'persistence.storageClass=fast',
      'config.adminAsns={4242420000}',
    ];
    type PersistentVolumeClaim = KubernetesObject & {
      spec: {
        accessModes: string[];
        storageClassName?: string;
        resources: { requests: { storage: string } };
      };
    };
    const message = (err: unknown) => String((err as { stderr?: string }).stderr ?? err);

    it('passes helm lint', async () => {
      expect(await helm('lint', CHART, ...GIT.flatMap((v) => ['--set', v]))).toMatch(/0 chart\(s\) failed/);
    });

    it('runs one replica, replaced not rolled, on a PersistentVolumeClaim, with the forge settings and secret files', async () => {
      const namespace = await server.createNamespace('chart-git');
      const objects = await renderChart(namespace, ...GIT);
      // no webhook, no Role (the git store never calls the Kubernetes API), nothing of the Lease
      expect(objects.map((o) => o.kind).sort()).toEqual([
        'ConfigMap',
        'Deployment',
        'PersistentVolumeClaim',
        'Secret',
        'Service',
        'ServiceAccount',
      ]);
      expect(objects.filter((o) => o.kind === 'Service').map((o) => o.metadata?.name)).toEqual(['peerops']);
      await dryRunApply(namespace, objects);

      const deployment = only<V1Deployment>(objects, 'Deployment');
      expect(deployment.spec?.replicas).toBe(1);
      expect(deployment.spec?.strategy).toEqual({ type: 'Recreate' });
      const pod = deployment.spec?.template.spec;
      expect(pod?.automountServiceAccountToken).toBe(false);
      expect(pod?.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 10001, fsGroup: 10001 });
      const container = pod?.containers[0];
      expect(container?.ports?.map((p) => p.name)).toEqual(['http']);
      // the token and the webhook secret are files from the operator's Secrets, never values
      expect(container?.env).toEqual([
        { name: 'PEEROPS_GIT_CREDENTIALS_FILE', value: '/etc/peerops/git-credentials/credentials' },
        { name: 'PEEROPS_GIT_WEBHOOK_SECRET_FILE', value: '/etc/peerops/git-webhook/secret' },
      ]);
      const mounted = (file: string) => {
        const mount = container?.volumeMounts?.find((m) => file.startsWith(`${m.mountPath}/`));
        const volume = pod?.volumes?.find((v) => v.name === mount?.name);
        return { readOnly: mount?.readOnly, secret: volume?.secret };
      };
      expect(mounted('/etc/peerops/git-credentials/credentials')).toEqual({
        readOnly: true,
        secret: {
          secretName: 'forge-credentials',
          items: [{ key: 'credentials', path: 'credentials' }],
          defaultMode: 0o400,
        },
      });
      expect(mounted('/etc/peerops/git-webhook/secret')).toEqual({
        readOnly: true,
        secret: {
          secretName: 'forge-webhook',
          items: [{ key: 'secret', path: 'secret' }],
          defaultMode: 0o400,
        },
      });

      // the data dir is the claim, kept on uninstall
      const config = only<KubernetesObject & { data: Record<string, string> }>(objects, 'ConfigMap').data;
      const dataMount = container?.volumeMounts?.find((m) => m.mountPath === config.PEEROPS_DATA);
      const claim = only<PersistentVolumeClaim>(objects, 'PersistentVolumeClaim');
      expect(pod?.volumes?.find((v) => v.name === dataMount?.name)?.persistentVolumeClaim).toEqual({
        claimName: claim.metadata?.name,
      });
      expect(claim.metadata?.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
      expect(claim.spec).toEqual({
        accessModes: ['ReadWriteOnce'],
        storageClassName: 'fast',
        resources: { requests: { storage: '2Gi' } },
      });

      expect(config).toMatchObject({
        PEEROPS_STORE: 'git',
        PEEROPS_GIT_REMOTE: 'https://forge.example/net/peering.git',
        PEEROPS_GIT_BRANCH: 'peering',
        PEEROPS_GIT_INTERVAL: '10',
        PEEROPS_GIT_PUSH_MODE: 'sync',
        PEEROPS_GIT_PUSH_TIMEOUT: '5',
      });
      expect(Object.keys(config).filter((k) => /LEASE|WEBHOOK|CREDENTIALS/.test(k))).toEqual([]);
    });

    it('mounts an existing claim, or an emptyDir without persistence, and follows no forge by default', async () => {
      const namespace = await server.createNamespace('chart-git-plain');
      const existing = await renderChart(namespace, 'store=git', 'persistence.existingClaim=peering-data');
      expect(existing.map((o) => o.kind)).not.toContain('PersistentVolumeClaim');
      await dryRunApply(namespace, existing);
      const volumes = (objects: KubernetesObject[]) =>
        only<V1Deployment>(objects, 'Deployment').spec?.template.spec?.volumes;
      expect(volumes(existing)?.find((v) => v.name === 'data')).toEqual({
        name: 'data',
        persistentVolumeClaim: { claimName: 'peering-data' },
      });
      // no remote: the repository on the volume is the store; nothing of a forge is rendered
      const config = only<KubernetesObject & { data: Record<string, string> }>(existing, 'ConfigMap').data;
      expect(Object.keys(config).filter((k) => k.startsWith('PEEROPS_GIT_'))).toEqual(['PEEROPS_GIT_BRANCH']);
      expect(volumes(existing)?.map((v) => v.name)).toEqual(['jwt', 'data']);

      const ephemeral = await renderChart('peerops-test', 'store=git', 'persistence.enabled=false');
      expect(ephemeral.map((o) => o.kind)).not.toContain('PersistentVolumeClaim');
      expect(volumes(ephemeral)?.find((v) => v.name === 'data')).toEqual({ name: 'data', emptyDir: {} });
      const noClass = await renderChart('peerops-test', 'store=git', 'persistence.storageClass=-');
      expect(only<PersistentVolumeClaim>(noClass, 'PersistentVolumeClaim').spec.storageClassName).toBe('');
    });

    it('gives the controller settings it starts with: the forge, its credentials and webhook secret', async () => {
      const objects = await renderChart('peerops-test', ...GIT);
      const container = only<V1Deployment>(objects, 'Deployment').spec?.template.spec?.containers[0];
      // the mounted Secrets' files, under a temp dir standing in for the pod's /
      const root = await mkdtemp(join(tmpdir(), 'peerops-chart-'));
      try {
        const files: Record<string, string> = {
          '/etc/peerops/git-credentials/credentials': 'peerops-bot:forge-token\n',
          '/etc/peerops/git-webhook/secret': 'hook-secret\n',
        };
        for (const [path, text] of Object.entries(files)) {
          await mkdir(join(root, path, '..'), { recursive: true });
          await writeFile(join(root, path), text);
        }
        const env: Record<string, string> = {
          ...only<KubernetesObject & { data: Record<string, string> }>(objects, 'ConfigMap').data,
        };
        for (const e of container?.env ?? []) env[e.name] = join(root, e.value ?? '');
        const config = loadConfig({}, env);
        // the pod listens on every address (the default is loopback only): the Service reaches it
        expect(config.listen).toEqual({ host: '', port: 8080 });
        expect(config.store).toBe('git');
        expect(config.webhook).toBeUndefined();
        expect(config.git).toEqual({
          branch: 'peering',
          remote: {
            url: 'https://forge.example/net/peering.git',
            intervalMs: 10_000,
            credentials: { username: 'peerops-bot', password: 'forge-token' },
            pushMode: 'sync',
            pushTimeoutMs: 5000,
          },
          webhookSecret: 'hook-secret',
        });
      } finally {
        await rm(root, { recursive: true, force: true });
      }
    });

    it('keeps the data claim on helm uninstall, and a new install of the release takes it again', async () => {
      const namespace = await server.createNamespace('chart-git-keep');
      const core = server.kubeConfig().makeApiClient(CoreV1Api);
      const claim = async () =>
        (await core.listNamespacedPersistentVolumeClaim({ namespace })).items.map((c) => c.metadata?.uid);
      await install('install', namespace, 'store=git');
      const [uid] = await claim();
      expect(uid).toBeDefined();
      await helm(
        'uninstall',
        'peerops',
        '--namespace',
        namespace,
        '--kubeconfig',
        await server.kubeconfigFile(),
      );
      expect(await claim()).toEqual([uid]);
      await install('install', namespace, 'store=git');
      expect(await claim()).toEqual([uid]);
    });

    // helm install and template stop at a `fail`; helm lint only reports it as [INFO] (its lint mode)
    it('refuses several replicas, and values it would ignore or that would leak a token', async () => {
      const refusal = (...set: string[]) =>
        renderChart('peerops-test', ...set).then(
          () => 'rendered',
          (err: unknown) => message(err),
        );
      expect(await refusal('store=git', 'controller.replicas=2')).toContain(
        'controller.replicas=2: the git store has one writer, so store=git runs one replica',
      );
      expect(
        await refusal('store=git', 'git.remote=https://bot:secret@forge.example/net/peering.git'),
      ).toContain('git.remote: credentials go in the Secret named by git.credentialsSecret, not in the URL');
      expect(await refusal('store=git', 'git.remote=ssh://forge.example/net/peering.git')).toContain(
        'is not an http(s):// URL',
      );
      expect(
        await refusal('store=git', 'git.remote=https://forge.example/x.git', 'git.intervalSeconds=0'),
      ).toContain("git.intervalSeconds: '0' is not a number of seconds from 1 to 3600");
      expect(
        await refusal('store=git', 'git.remote=https://forge.example/x.git', 'git.pushMode=later'),
      ).toContain("git.pushMode: 'later' is not sync or async");
      expect(
        await refusal('store=git', 'git.remote=https://forge.example/x.git', 'git.pushTimeoutSeconds=0'),
      ).toContain("git.pushTimeoutSeconds: '0' is not a number of seconds from 1 to 60");
      expect(await refusal('store=git', 'git.credentialsSecret=forge-credentials')).toContain(
        'set git.remote too',
      );
      expect(await refusal('git.remote=https://forge.example/x.git')).toContain(
        'are for the git store: set store=git',
      );
      expect(await refusal('store=svn')).toContain("store: 'svn' is neither kubernetes nor git");
      // one replica asked for explicitly is fine
      expect(await refusal('store=git', 'controller.replicas=1')).toBe('rendered');
    });

    it('renders nothing of the admission webhook, with or without cert-manager', async () => {
      const objects = await renderChart(
        'peerops-test',
        'store=git',
        'webhook.enabled=true',
        'webhook.certManager.enabled=true',
      );
      expect(objects.map((o) => o.kind)).toEqual(
        expect.not.arrayContaining(['ValidatingWebhookConfiguration', 'Certificate', 'Issuer', 'Role']),
      );
      expect(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata?.name)).toEqual([
        'peerops-jwt',
      ]);
      const pod = only<V1Deployment>(objects, 'Deployment').spec?.template.spec;
      // PEEROPS_WEBHOOK_LISTEN with the git store stops the controller at start (controller/config.ts)
      expect(pod?.containers[0]?.env ?? []).toEqual([]);
      expect(pod?.volumes?.map((v) => v.name)).toEqual(['jwt', 'data']);
    });
  });

  it('ships the generated CRDs', async () => {
    for (const name of [
      'peerops.dev_routers.yaml',
      'peerops.dev_peeringsessions.yaml',
      'peerops.dev_routingpolicies.yaml',
    ]) {
      expect(await readFile(join(CHART, 'crds', name), 'utf8')).toBe(
        await readFile(join(ROOT, 'crds', name), 'utf8'),
      );
    }
  });
});
