/**
 * Agent benchmark: reconcile-pass time and agent memory for 10, 50 and 100 sessions, against the real
 * controller (in-process, real git store), real BIRD and real wireguard-go in a network namespace.
 * Prints, per size: the first pass (creates every tunnel and file, one configure), a pass with
 * nothing to change (must make zero writes and zero configure calls), and the agent's memory.
 * Needs root (namespaces). Usage: npm run bench:agent [-- 10 50 100]
 */
import { startAgentLab } from '../test/agent/lab.ts';
import { expectOk } from '../test/api/helpers.ts';

const sizes = process.argv
  .slice(2)
  .map(Number)
  .filter((n) => n > 0);
const SIZES = sizes.length ? sizes : [10, 50, 100];

function mb(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

const rows: string[] = [];
for (const n of SIZES) {
  const L = await startAgentLab('agx');
  try {
    const routerUuid = L.h.store.getRouter(L.router)?.spec.uuid;
    for (let i = 0; i < n; i++) {
      const asn = 4242422000 + i;
      const token = L.h.tokens.issueToken(asn, 'user').token;
      const res = await expectOk(
        L.h.post('/session', token, {
          action: 'create',
          router: routerUuid,
          ipv6: `fd42:${(0x2000 + i).toString(16)}::1`,
          linkLocal: `fe80::${(0x100 + i).toString(16)}`,
          endpoint: `[fd00:ffff::${(i + 2).toString(16)}]:51820`,
          publicKey: Buffer.alloc(32, i + 1).toString('base64'),
          mtu: 1420,
        }),
      );
      await expectOk(L.h.post('/admin/session', L.h.admin, { action: 'approve', uuid: res.json().uuid }));
    }
    const agent = L.agent();
    global.gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    let t = performance.now();
    const first = await agent.syncOnce();
    const firstMs = performance.now() - t;
    const configuresBefore = agent.applier.configureCalls;
    const noops: number[] = [];
    let noopWrites = 0;
    for (let i = 0; i < 3; i++) {
      t = performance.now();
      const p = await agent.syncOnce();
      noops.push(performance.now() - t);
      noopWrites += p?.writes ?? 0;
    }
    const noopConfigures = agent.applier.configureCalls - configuresBefore;
    const mem = process.memoryUsage();
    const row = [
      `sessions=${n}`,
      `first pass=${firstMs.toFixed(0)} ms (tunnels ${first?.interfacesChanged}, writes ${first?.writes}, configure ${first?.configured ? 1 : 0}, reports ${first?.reports.length})`,
      `no-op pass=${Math.min(...noops).toFixed(0)}/${(noops.reduce((a, b) => a + b, 0) / noops.length).toFixed(0)} ms min/avg (writes ${noopWrites}, configure ${noopConfigures})`,
      `agent heap=${mb(mem.heapUsed)} (+${mb(mem.heapUsed - heapBefore)}) rss=${mb(mem.rss)}`,
    ].join('  ');
    console.log(row);
    rows.push(row);
    await agent.close();
  } finally {
    await L.close();
  }
}
console.log(
  `\nbench-agent: ${rows.length} sizes measured (RSS includes the in-process controller used as the source of truth)`,
);
