/**
 * charts/peerops: helm lint, helm template (every optional part on), and each rendered object checked by
 * the test API server with a server-side dry run (apply), so schemas, RBAC rules and the CRDs are real.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubernetesObjectApi, PatchStrategy, type KubernetesObject } from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  TOOLS_BUILD_TIMEOUT_MS,
  ROOT,
  installCrds,
  startApiServer,
  type TestApiServer,
} from './apiserver.ts';

const run = promisify(execFile);
const CHART = join(ROOT, 'charts', 'peerops');
const VALUES = [
  'agent.enabled=true',
  'prometheusRule.enabled=true',
  'agent.configs.edge1.router=fra1',
  'config.adminAsns={4242420000}',
  'controller.replicas=3',
  'config.redisUrl=redis://redis:6379',
];

let server: TestApiServer;
beforeAll(async () => {
  server = await startApiServer();
  await installCrds(server.kubeConfig(), join(ROOT, 'test', 'k8s', 'fixtures'));
}, TOOLS_BUILD_TIMEOUT_MS);
afterAll(async () => {
  await server?.stop();
});

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

describe('charts/peerops', () => {
  it('passes helm lint with the defaults and with every optional part on', async () => {
    expect(await helm('lint', CHART)).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    expect(await helm('lint', CHART, ...VALUES.flatMap((v) => ['--set', v]))).toMatch(/0 chart\(s\) failed/);
  });

  it('renders manifests the API server accepts (server-side dry run)', async () => {
    const namespace = await server.createNamespace('chart');
    const rendered = await helm(
      'template',
      'peerops',
      CHART,
      '--namespace',
      namespace,
      '--include-crds',
      ...VALUES.flatMap((v) => ['--set', v]),
    );
    const objects = loadAll(rendered).filter(
      (o): o is KubernetesObject => typeof o === 'object' && o !== null,
    );
    const kinds = objects.map((o) => o.kind).sort();
    expect(kinds).toEqual([
      'ConfigMap',
      'CustomResourceDefinition',
      'CustomResourceDefinition',
      'CustomResourceDefinition',
      'DaemonSet',
      'Deployment',
      'PrometheusRule',
      'Role',
      'RoleBinding',
      'Secret',
      'Secret',
      'Service',
      'ServiceAccount',
    ]);
    const client = KubernetesObjectApi.makeApiClient(server.kubeConfig());
    for (const object of objects) {
      if (object.kind !== 'CustomResourceDefinition') object.metadata = { ...object.metadata, namespace };
      // apply, dry run: the server validates and admits without storing
      const checked = await client
        .patch(object, undefined, 'All', 'peerops-chart-test', true, PatchStrategy.ServerSideApply)
        .catch((err: unknown) => {
          throw new Error(
            `${object.kind} ${object.metadata?.name} refused: ${String((err as { body?: unknown }).body ?? err)}`,
          );
        });
      expect(checked.metadata?.name).toBe(object.metadata?.name);
    }

    const deployment = objects.find((o) => o.kind === 'Deployment') as KubernetesObject & {
      spec: {
        replicas: number;
        template: { spec: { containers: { livenessProbe: { httpGet: { path: string } } }[] } };
      };
    };
    expect(deployment.spec.replicas).toBe(3);
    expect(deployment.spec.template.spec.containers[0]?.livenessProbe.httpGet.path).toBe('/health');
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

  it('wraps files/alerts.yaml in the PrometheusRule unchanged', async () => {
    const rendered = await helm(
      'template',
      'peerops',
      CHART,
      '--set',
      'prometheusRule.enabled=true',
      '--show-only',
      'templates/prometheusrule.yaml',
    );
    const rule = loadAll(rendered)[0] as { spec: unknown };
    const alerts = loadAll(await readFile(join(CHART, 'files', 'alerts.yaml'), 'utf8'))[0];
    expect(rule.spec).toEqual(alerts);
  });

  it('pins clients to one replica without a shared Redis, and shares Redis when given', async () => {
    const render = async (...set: string[]) => {
      const out = await helm(
        'template',
        'peerops',
        CHART,
        ...set.flatMap((v) => ['--set', v]),
        '--show-only',
        'templates/service.yaml',
        '--show-only',
        'templates/configmap.yaml',
      );
      const objects = loadAll(out) as { kind: string; spec?: { sessionAffinity?: string }; data?: object }[];
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
        loadAll(
          await helm(
            'template',
            'peerops',
            CHART,
            ...['agent.enabled=true', ...set].flatMap((v) => ['--set', v]),
            '--show-only',
            'templates/agent-daemonset.yaml',
          ),
        ) as AgentDaemonSet[]
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

  it('passes the log level to the controller', async () => {
    const level = async (...set: string[]) =>
      (
        loadAll(
          await helm(
            'template',
            'peerops',
            CHART,
            ...set.flatMap((v) => ['--set', v]),
            '--show-only',
            'templates/configmap.yaml',
          ),
        ) as { data: Record<string, string> }[]
      )[0]?.data.PEEROPS_LOG_LEVEL;
    expect(await level()).toBe('info');
    expect(await level('config.logLevel=debug')).toBe('debug');
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
