/**
 * The real `peerops agent` killed with SIGKILL while its first pass writes the BIRD files of 20 sessions
 * (real BIRD, real disk): the temp files and the configure marker it left are removed by the next
 * agent's start, which says so in one log line with the count per directory, and that agent then
 * reconciles as usual: BIRD runs every session's protocol (docs/agent.md, "Files and links the agent
 * owns"). A marker removed so is owed to BIRD: killed after swapping in a policy change and before
 * BIRD's configure, the next agent configures BIRD although its files already match.
 */
import { watch, type FSWatcher } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BirdControl } from '../../agent/bird/control.ts';
import { isLeftover } from '../../agent/system/leftovers.ts';
import { expectOk } from '../api/helpers.ts';
import { waitFor } from '../support/netns.ts';
import { ROUTER_ASN, startAgentLab, wgKeyPair, type AgentLab } from './lab.ts';

const SESSIONS = 20;

let L: AgentLab;
let bird: BirdControl;
let watcher: FSWatcher | undefined;
const ports: number[] = [];

beforeAll(async () => {
  L = await startAgentLab('agk');
  bird = new BirdControl(L.config.routing.controlSocket, { poolSize: 1, poolSizeMax: 2 });
  for (let i = 0; i < SESSIONS; i++) {
    const asn = 4242425100 + i;
    const res = await expectOk(
      L.h.post('/session', L.h.tokens.issueToken(asn, 'user').token, {
        action: 'create',
        router: L.router,
        ipv6: `fd42:${(asn % 10000).toString(16)}::1`,
        linkLocal: `fe80::51${i.toString(16).padStart(2, '0')}`,
        endpoint: `[fd00:99::${i + 2}]:51820`,
        publicKey: (await wgKeyPair()).publicKey,
        mtu: 1420,
      }),
    );
    const uuid = (res.json() as { uuid: string }).uuid;
    await expectOk(L.h.post('/admin/session', L.h.admin, { action: 'approve', uuid }));
    ports.push(L.h.store.getSession(uuid)!.spec.listenPort);
  }
}, 120_000);
afterAll(async () => {
  watcher?.close();
  bird?.close();
  await L?.close();
});

/** The leftovers in every directory the agent cleans at start (agent.ts removeLeftovers). */
async function leftovers(): Promise<string[]> {
  const dirs = [
    L.config.birdConfigRoot,
    L.config.routing.peerConfDir,
    L.config.routing.ibgpConfDir,
    L.config.tunnel.configDir,
  ];
  const found = await Promise.all(
    dirs.map(async (dir) =>
      (await readdir(dir).catch(() => [] as string[])).filter(isLeftover).map((name) => join(dir, name)),
    ),
  );
  return found.flat().sort();
}

describe('agent start after a SIGKILL mid-pass', () => {
  it('removes the temp files and the marker the killed pass left, in one log line, then reconciles', async () => {
    const first = L.spawnAgent();
    // Killed as soon as the first temp file of a session's BIRD file appears: the pass is writing.
    const killed = new Promise<void>((resolve) => {
      watcher = watch(L.config.routing.peerConfDir, (_event, name) => {
        if (!name?.endsWith('.tmp') || first.child.pid === undefined) return;
        watcher?.close();
        process.kill(first.child.pid, 'SIGKILL');
        resolve();
      });
    });
    await Promise.race([
      killed,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error(`no BIRD file written:\n${first.output().slice(-3000)}`)), 60_000),
      ),
    ]);
    await first.kill('SIGKILL');
    const left = await leftovers();
    // The marker is written before the first file and removed only after BIRD's configure.
    expect(left).toContain(join(L.config.birdConfigRoot, '.peerops-configure-pending'));
    const tmp = left.filter((p) => p.endsWith('.tmp'));
    console.log(`killed mid-pass: ${left.length} leftovers, ${tmp.length} temp files`);

    const second = L.spawnAgent();
    const line = async () =>
      second
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"removed what a killed pass left behind"'));
    await waitFor('the leftovers log line', async () => (await line()).length > 0, 30_000, 100);
    const lines = await line();
    expect(lines).toHaveLength(1);
    const logged = JSON.parse(lines[0]!) as { removed: number; dirs: Record<string, number> };
    // At least what was listed after the kill: a write the kill caught inside the kernel can still land
    // after the listing (seen under a loaded CI run), and the start removes that one too.
    expect(logged.removed).toBeGreaterThanOrEqual(left.length);
    const perDir: Record<string, number> = {};
    for (const p of left)
      perDir[p.slice(0, p.lastIndexOf('/'))] = (perDir[p.slice(0, p.lastIndexOf('/'))] ?? 0) + 1;
    for (const [dir, n] of Object.entries(perDir)) expect(logged.dirs[dir]).toBeGreaterThanOrEqual(n);
    expect(Object.values(logged.dirs).reduce((a, b) => a + b, 0)).toBe(logged.removed);

    // Then the pass as usual: every session's protocol runs in BIRD, and nothing is left over.
    await waitFor(
      `BIRD runs all ${SESSIONS} sessions`,
      async () => {
        const names = new Set((await bird.protocols()).map((p) => p.name));
        return ports.every((port) => names.has(`dn42_${port}`));
      },
      60_000,
      500,
    ).catch((err: Error) => {
      throw new Error(`${err.message}:\n${second.output().slice(-3000)}`);
    });
    // A later pass may be mid-write at this instant (its own marker, removed after its configure).
    await waitFor('nothing left over', async () => (await leftovers()).length === 0, 30_000, 100).catch(
      async (err: Error) => {
        throw new Error(`${err.message}: ${(await leftovers()).join(', ')}`);
      },
    );
    await second.kill('SIGTERM');
  }, 180_000);

  it('configures BIRD after a kill between the swap and the configure, although the files match', async () => {
    const agent = L.spawnAgent();
    const port = ports[0]!;
    const importLimit = async () =>
      /Channel ipv6[^]*?Import limit:\s+(\d+)/.exec(
        (await bird.command(`show protocols all dn42_${port}`)).lines.map((l) => l.text).join('\n'),
      )?.[1];
    await waitFor(
      'the agent settled',
      async () => (await leftovers()).length === 0 && !!(await importLimit()),
      60_000,
      200,
    );
    const before = await importLimit();
    const birdPid = Number((await readFile(join(L.bird.dir, 'bird.pid'), 'utf8')).trim());
    // BIRD stopped: the pass that swaps the new policy in waits on its configure, and is killed there.
    process.kill(birdPid, 'SIGSTOP');
    try {
      await expectOk(
        L.h.post('/admin/policy', L.h.admin, {
          action: 'set',
          spec: {
            dn42Asn: ROUTER_ASN,
            rpkiServers: [{ host: '127.0.0.1', port: 8282 }],
            allowPrivateEndpoints: true,
            importLimit: { ipv6: 4242 },
          },
        }),
      );
      await waitFor(
        'the new policy swapped in, BIRD not configured',
        async () =>
          (await leftovers()).includes(join(L.config.birdConfigRoot, '.peerops-configure-pending')) &&
          (await readFile(L.config.birdMainConfig, 'utf8')).includes('import limit 4242'),
        60_000,
        50,
      );
      await agent.kill('SIGKILL');
    } finally {
      process.kill(birdPid, 'SIGCONT');
    }
    expect(await importLimit()).toBe(before);

    const next = L.spawnAgent();
    await waitFor(
      'BIRD runs the new policy',
      async () => (await importLimit()) === '4242',
      30_000,
      200,
    ).catch((err: Error) => {
      throw new Error(`${err.message}:\n${next.output().slice(-3000)}`);
    });
    const line = next
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"removed what a killed pass left behind"'));
    expect(JSON.parse(line!)).toMatchObject({ removed: 1, dirs: { [L.config.birdConfigRoot]: 1 } });
    expect(await leftovers()).toEqual([]);
    await next.kill('SIGTERM');
  }, 180_000);
});
