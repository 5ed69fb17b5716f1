/**
 * The agent saying what is wrong (docs/agent.md, "When something is wrong"), against the real controller,
 * BIRD and wireguard-go in network namespaces: a broken local.d file is a node condition naming file and
 * line with no session blamed; /health gives each failed check's reason; a 401 stops the real process
 * with exit 77; SIGTERM with sessions up and a long poll open exits well within 10 s.
 */
import { execFile } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Agent } from '../../agent/agent.ts';
import { startServer } from '../../agent/server.ts';
import { waitFor } from '../support/netns.ts';
import { startAgentLab, type AgentLab, type Peer } from './lab.ts';
import { freePort } from '../support/ports.ts';

const exec = promisify(execFile);
const REPO = join(import.meta.dirname, '..', '..');

let L: AgentLab;
let agent: Agent;
let a: Peer;
let b: Peer;
let uuidA: string;
let portA: number;
const status = (id: string) => L.h.store.getSession(id)?.status;
// the agent's node condition; Ready, Reconciling and Stalled beside it are the store core's
const configApplied = <C extends { type: string }>(conditions: C[] | undefined): C[] =>
  (conditions ?? []).filter((c) => c.type === 'ConfigApplied');
const routerConditions = () => configApplied(L.h.store.getRouter(L.router)?.status.conditions);

beforeAll(async () => {
  L = await startAgentLab('agd');
  agent = L.agent();
  a = await L.addPeer('pa', 'fe80::a');
  b = await L.addPeer('pb', 'fe80::b');
  uuidA = await L.approvedSession(a);
  portA = L.h.store.getSession(uuidA)!.spec.listenPort;
  await L.connectPeer(a, portA);
  await agent.syncOnce();
  await waitFor(
    'session A Established',
    async () => (await agent.bird.protocols(`dn42_${portA}`))[0]?.bgpState === 'Established',
    45_000,
    500,
  );
  await waitFor('A reported 1', async () => (await agent.syncOnce(), status(uuidA)?.code === 1), 20_000, 200);
}, 120_000);
afterAll(async () => {
  await agent?.close();
  await L?.close();
});

describe('agent diagnostics', () => {
  it('a broken local.d file: a node condition naming file and line, no session blamed; mended, it clears', async () => {
    const broken = join(L.root, 'bird', 'local.d', 'operator.conf');
    await writeFile(
      broken,
      '# the operator’s own\nprotocol static my_static {\n  ipv6;\n  route fd00:1::/48 blackhole;\n',
    );
    const uuidB = await L.approvedSession(b);
    const portB = L.h.store.getSession(uuidB)!.spec.listenPort;
    for (let i = 0; i < 3; i++) {
      const pass = await agent.syncOnce();
      expect(pass?.failed.size).toBe(0);
      expect(pass?.node).toMatchObject({ reason: 'LocalConfigRejected', file: broken });
      expect(pass?.reports.filter((r) => r.status === 2 || r.status === 6)).toEqual([]);
    }
    // nobody blamed: A stays up and ACTIVE, B waits for the node to be mended in QUEUED_FOR_SETUP
    expect(status(uuidA)).toMatchObject({ code: 1, bgpState: 'Established' });
    expect(status(uuidA)?.lastError).toBeUndefined();
    expect(status(uuidB)?.code).toBe(4);
    expect((await agent.bird.protocols(`dn42_${portA}`))[0]?.bgpState).toBe('Established');
    expect(await agent.bird.protocols(`dn42_${portB}`)).toEqual([]);

    await agent.heartbeatOnce();
    const [condition] = routerConditions();
    expect(condition).toMatchObject({
      type: 'ConfigApplied',
      status: 'False',
      reason: 'LocalConfigRejected',
    });
    // an unclosed block: BIRD names the end of the main config; the agent finds the file that causes it
    expect(condition?.message).toMatch(
      new RegExp(
        `^BIRD refused the configuration: ${broken}: BIRD accepts the configuration without this file: `,
      ),
    );
    const admin = (await L.h.post('/admin/router', L.h.admin, { action: 'list' })).json() as {
      routers: { name: string; status: { conditions?: { type: string }[] } }[];
    };
    expect(configApplied(admin.routers.find((r) => r.name === L.router)?.status.conditions)).toEqual([
      condition,
    ]);
    // the admin's CLI shows it: a column and a warning line with the file
    const cli = await exec(process.execPath, [join(REPO, 'bin', 'peerops.ts'), 'admin', 'router', 'list'], {
      env: { ...process.env, PEEROPS_URL: L.url, PEEROPS_TOKEN: L.h.admin, XDG_CONFIG_HOME: L.root },
    });
    expect(cli.stdout).toMatch(/^NAME\s+.*\s+CONDITIONS$/m);
    expect(cli.stdout).toContain('ConfigApplied=False (LocalConfigRejected)');
    expect(cli.stdout).toContain(
      `warning: ${L.router}: ConfigApplied False (LocalConfigRejected): BIRD refused the configuration: ${broken}`,
    );

    const health = await agent.health();
    expect(health.ok).toBe(false);
    expect(health.checks.config).toEqual({ ok: false, reason: condition?.message });
    expect(health.checks.bird).toEqual({ ok: true });
    const metrics = await agent.metrics.registry.metrics();
    expect(metrics).toMatch(/^peerops_agent_config_applied 0$/m);
    expect(metrics).toMatch(/^peerops_agent_sync_passes_total\{result="error"\} [3-9]$/m);

    // A local.d protocol named like a session: BIRD names the local.d file; no session is blamed.
    await writeFile(broken, `protocol static dn42_${portA} {\n  ipv6;\n}\n`);
    const clash = await agent.syncOnce();
    expect(clash?.node).toMatchObject({ reason: 'LocalConfigRejected', file: broken, line: 1 });
    expect(clash?.failed.size).toBe(0);
    expect(status(uuidA)?.code).toBe(1);

    await rm(broken);
    const mended = await agent.syncOnce();
    expect(mended).toMatchObject({ node: undefined, configured: true });
    await agent.heartbeatOnce();
    expect(routerConditions()).toEqual([
      expect.objectContaining({ type: 'ConfigApplied', status: 'True', reason: 'Applied' }),
    ]);
    expect((await agent.health()).checks.config).toEqual({ ok: true });
    expect(await agent.bird.protocols(`dn42_${portB}`)).toHaveLength(1);
  }, 90_000);

  it('a 401 from the controller stops the agent with a clear line and exit 77', async () => {
    const child = L.spawnAgent({
      token: 'x'.repeat(40),
      listen: `127.0.0.1:${await freePort()}`,
    });
    const code = await new Promise<number | null>((resolve) => child.child.once('exit', (c) => resolve(c)));
    expect(code, child.output()).toBe(77);
    expect(child.output()).toMatch(/the controller refused the agent token \(401\)/);
    // one line says it; no retry loop of 401s before the exit
    expect(child.output().match(/refused the agent token/g)).toHaveLength(1);
    expect(child.output()).not.toMatch(/sync failed; keeping the running config/);
  }, 60_000);

  it('SIGTERM with sessions up and a long poll open: exits 0 well within 10 s', async () => {
    const child = L.spawnAgent({ listen: `127.0.0.1:${await freePort()}` });
    // two passes: the second waits in a long poll
    await waitFor(
      'a long poll open',
      async () => (child.output().match(/"msg":"agent started"/) ? true : false),
      30_000,
      100,
    );
    await new Promise((r) => setTimeout(r, 3000));
    const t0 = Date.now();
    await child.kill('SIGTERM');
    const took = Date.now() - t0;
    console.log(`SIGTERM with a long poll open: exited after ${took} ms`);
    expect(child.child.exitCode).toBe(0);
    expect(took).toBeLessThan(10_000);
    expect(status(uuidA)?.code).toBe(1);
  }, 60_000);
  // last: BIRD stays stopped
  it('/health: degraded with the reason of each failed check', async () => {
    const port = await freePort();
    const server = await startServer(
      { ...L.config, server: { ...L.config.server, listen: `127.0.0.1:${port}` } },
      agent,
    );
    try {
      await agent.syncOnce(); // the in-process agent runs no loops: a pass is its contact
      const ok = await fetch(`http://127.0.0.1:${port}/health`);
      expect(ok.status, JSON.stringify(await agent.health())).toBe(200);
      expect(await ok.json()).toMatchObject({
        status: 'ok',
        checks: { bird: { ok: true }, controller: { ok: true }, config: { ok: true } },
      });
      await L.bird.stop();
      const down = await fetch(`http://127.0.0.1:${port}/health`);
      expect(down.status).toBe(503);
      const body = (await down.json()) as {
        status: string;
        checks: { bird: { ok: boolean; reason: string } };
      };
      expect(body.status).toBe('degraded');
      expect(body.checks.bird.ok).toBe(false);
      expect(body.checks.bird.reason).toMatch(
        new RegExp(`^BIRD control socket ${L.config.routing.controlSocket}: .*(ENOENT|ECONNREFUSED)`),
      );
      // with BIRD gone a pass is an error, not a refusal
      const pass = await agent.syncOnce();
      expect(pass?.node).toBeUndefined();
      expect(pass?.failed.size).toBe(0);
    } finally {
      server.close();
      server.closeAllConnections();
    }
    const unreachable = L.agent();
    try {
      // never contacted: the controller check says so
      expect((await unreachable.health()).checks.controller).toEqual({
        ok: false,
        reason: `no answer from the controller ${L.url} yet`,
      });
    } finally {
      await unreachable.close();
    }
  }, 60_000);
});
