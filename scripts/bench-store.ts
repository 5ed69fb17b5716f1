/**
 * Git store benchmark: cold start time and memory with 1,000 and 10,000 sessions in the repository,
 * create latency p50/p99, and the observation flush (every session's metrics and every router's heartbeat
 * changed): its time and what it adds to the repository (nothing, it goes to the observation file). Each measurement runs in a fresh process so memory figures are its own.
 *
 *   npm run bench:store                                   (both sizes)
 *   node scripts/bench-store.ts 2000                      (one size)
 *   node scripts/bench-store.ts --generate DIR 10000      (keep a repository, e.g. for profiling)
 *   node scripts/bench-store.ts --measure DIR/store.git 0 (one start of the store on it)
 *   node scripts/bench-store.ts --objects                 (own object code against isomorphic-git's)
 */
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { createGitStore } from '../controller/store/git/index.ts';
import { gcAuto } from '../controller/store/git/housekeeping.ts';
import { renderManifest, routerPath, sessionPath } from '../common/manifests.ts';

const exec = promisify(execFile);
const ROUTERS = 4;
const CREATES = 300;
const GIT_ENV = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };

const key = () => randomBytes(32).toString('base64');
const mib = (bytes: number) => `${(bytes / 1048576).toFixed(0)} MiB`;
const FLUSHES = 3;

/** Bytes (content and on disk) and files under the repository's objects/ directory. */
async function objectsSize(dir: string): Promise<{ bytes: number; disk: number; files: number }> {
  let bytes = 0;
  let disk = 0;
  let files = 0;
  for (const entry of await readdir(join(dir, 'objects'), { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const s = await stat(join(entry.parentPath, entry.name));
    bytes += s.size;
    disk += s.blocks * 512;
    files++;
  }
  return { bytes, disk, files };
}

/** Every session's metrics and every router's heartbeat changed, then flushed; the slowest of FLUSHES. */
async function measureFlush(store: ReturnType<typeof createGitStore>, dir: string) {
  const before = await objectsSize(dir);
  let flushMs = 0;
  for (let f = 1; f <= FLUSHES; f++) {
    const at = new Date().toISOString();
    for (const s of store.listSessions())
      store.recordSessionMetrics(s.spec.uuid, { rtt: f, rxBytes: f, txBytes: f, routesImported: f, at });
    for (const r of store.listRouters()) store.recordRouterStatus(r.name, { uptime: f, lastHeartbeat: at });
    const t = performance.now();
    await store.flushObservations();
    flushMs = Math.max(flushMs, performance.now() - t);
  }
  const after = await objectsSize(dir);
  return { flushMs, addedBytes: after.bytes - before.bytes, addedFiles: after.files - before.files };
}

/** A bare repository with `sessions` complete session manifests, as people would have pushed them. */
async function generate(root: string, sessions: number): Promise<string> {
  const work = join(root, 'work');
  const write = async (path: string, text: string) => {
    await mkdir(dirname(join(work, path)), { recursive: true });
    await writeFile(join(work, path), text);
  };
  for (let r = 1; r <= ROUTERS; r++) {
    const name = `r${r}`;
    await write(
      routerPath(name),
      renderManifest('Router', name, {
        uuid: randomUUID(),
        displayName: `Router ${r}`,
        nodeId: r,
        region: 'eu',
        endpointHost: `${name}.example.net`,
        publicKey: key(),
        linkLocal: `fe80::1:${r.toString(16)}`,
        loopback: { ipv6: `fd00::${r}` },
      }),
    );
  }
  await write('policy/default.yaml', renderManifest('RoutingPolicy', 'default', { dn42Asn: 4242420000 }));
  for (let i = 0; i < sessions; i++) {
    const router = `r${(i % ROUTERS) + 1}`;
    const asn = 4242420000 + Math.floor(i / ROUTERS);
    await write(
      sessionPath(router, asn),
      renderManifest('PeeringSession', `as${asn}-${router}`, {
        uuid: randomUUID(),
        asn,
        router,
        ipv6: `fd42:${(i % 65535).toString(16)}::1`,
        linkLocal: 'fe80::2',
        endpoint: `peer${i}.example.org:51820`,
        publicKey: key(),
        mtu: 1420,
        listenPort: 20000 + (asn % 10000),
        createdAt: new Date().toISOString(),
      }),
    );
  }
  const git = (...args: string[]) => exec('git', args, { cwd: work, env: GIT_ENV, maxBuffer: 1 << 26 });
  await git('init', '-q', '-b', 'main');
  await git('add', '.');
  await git('-c', 'user.name=bench', '-c', 'user.email=bench@example.org', 'commit', '-q', '-m', 'generated');
  const bare = join(root, 'store.git');
  await exec('git', ['clone', '-q', '--bare', work, bare], { env: GIT_ENV });
  await rm(work, { recursive: true, force: true });
  return bare;
}

/** In a fresh process: start the store, report time and memory, then time creates. */
async function measure(dir: string, creates: number): Promise<void> {
  const started = performance.now();
  const cpu = process.cpuUsage();
  const store = createGitStore({ dir, logger: pino({ level: 'warn' }), pollIntervalMs: 60000 });
  await store.start();
  const startMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const startCpuMs = (used.user + used.system) / 1000;
  global.gc?.();
  const mem = process.memoryUsage();
  const latencies: number[] = [];
  for (let i = 0; i < creates; i++) {
    const asn = 64512 + i;
    const t = performance.now();
    await store.createSession(
      {
        asn,
        router: 'r1',
        ipv6: `fd42:ffff:${i.toString(16)}::1`,
        linkLocal: 'fe80::3',
        publicKey: key(),
        mtu: 1420,
      },
      { code: 3, name: 'PENDING_REVIEW' },
      { name: `AS${asn}`, role: 'user', asn },
      `create session AS${asn} on r1`,
    );
    latencies.push(performance.now() - t);
  }
  const flush = creates > 0 ? await measureFlush(store, dir) : undefined;
  await store.close();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0;
  console.log(
    JSON.stringify({
      sessions: store.listSessions().length - creates,
      startMs,
      startCpuMs,
      rss: mem.rss,
      heapUsed: mem.heapUsed,
      p50: pct(50),
      p99: pct(99),
      flush,
    }),
  );
}

interface Figures {
  sessions: number;
  startMs: number;
  startCpuMs: number;
  rss: number;
  heapUsed: number;
  p50: number;
  p99: number;
  flush?: { flushMs: number; addedBytes: number; addedFiles: number };
}

async function child(dir: string, creates: number): Promise<Figures> {
  const { stdout } = await exec(
    process.execPath,
    ['--expose-gc', import.meta.filename, '--measure', dir, String(creates)],
    { maxBuffer: 1 << 24 },
  );
  const line = stdout.trim().split('\n').pop() ?? '{}';
  return JSON.parse(line) as Figures;
}

async function bench(sessions: number): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'peerops-bench-store-'));
  try {
    const t = performance.now();
    const dir = await generate(root, sessions);
    console.log(
      `\n${sessions} sessions (${ROUTERS} routers), repository generated in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
    // first start: every session arrives without status and gets one (one commit on the status ref)
    const first = await child(dir, 0);
    // housekeeping packs what the first start wrote loose
    const loose = await objectsSize(dir);
    const gc = await gcAuto(dir, new AbortController().signal);
    const packed = await objectsSize(dir);
    // cold start proper: a restarted controller on a repository it has written before
    const cold = await child(dir, CREATES);
    // the same without the parse cache (first start after an upgrade): every blob read and parsed again
    await rm(join(dir, 'peerops', 'parsed.json'));
    const uncached = await child(dir, 0);
    const row = (label: string, f: Figures) =>
      console.log(
        `  ${label.padEnd(28)} ${(f.startMs / 1000).toFixed(2).padStart(6)} s   rss ${mib(f.rss).padStart(8)}   heap ${mib(f.heapUsed).padStart(8)}   (${f.sessions} sessions loaded)`,
      );
    row('first start (status import)', first);
    const size = (o: { files: number; disk: number }) => `${o.files} files, ${mib(o.disk)} on disk`;
    console.log(
      `  housekeeping (git gc --auto)  ${gc.ran ? `${(gc.ms / 1000).toFixed(2).padStart(6)} s` : gc.reason}: objects ${size(loose)} → ${size(packed)}`,
    );
    row('cold start (restart)', cold);
    row('cold start, no parse cache', uncached);
    console.log(
      `  create latency over ${CREATES} creates: p50 ${cold.p50.toFixed(1)} ms, p99 ${cold.p99.toFixed(1)} ms`,
    );
    if (cold.flush)
      console.log(
        `  observation flush (all metrics and heartbeats changed), slowest of ${FLUSHES}: ${cold.flush.flushMs.toFixed(0)} ms; ` +
          `the repository grew by ${cold.flush.addedFiles} object files, ${cold.flush.addedBytes} bytes`,
      );
  } finally {
    // git may still be packing the generating clone in the background (gc --auto detaches): retry
    await rm(root, { recursive: true, force: true, maxRetries: 10, retryDelay: 500 });
  }
}

/**
 * `--objects`: what one create's objects cost written by the store's own object code (objects.ts: native
 * zlib, then isomorphic-git's writeObject of the deflated bytes) against isomorphic-git's own
 * writeBlob/writeTree/writeCommit (which deflate through CompressionStream): a session blob, its router's
 * tree of `entries` sessions, a root tree and a commit, ROUNDS times each, into one repository.
 */
async function benchObjects(entries: number): Promise<void> {
  const ROUNDS = 200;
  const dir = await mkdtemp(join(tmpdir(), 'peerops-bench-objects-'));
  try {
    const git = (await import('isomorphic-git')).default;
    const { gitFs } = await import('../controller/git-fs.ts');
    const own = await import('../controller/store/git/objects.ts');
    await git.init({ fs: gitFs, dir, bare: true });
    const text = renderManifest('PeeringSession', 'as4242420001-fra1', {
      uuid: randomUUID(),
      asn: 4242420001,
      router: 'fra1',
      ipv6: 'fd00::1',
      linkLocal: 'fe80::1',
      publicKey: key(),
      mtu: 1420,
      listenPort: 20001,
    });
    const names = Array.from({ length: entries }, (_, i) => `as${4242420000 + i}.yaml`);
    const person = { name: 'peerops', email: 'peerops@localhost', timestamp: 1764000000, timezoneOffset: 0 };
    const variants: Record<string, (round: number) => Promise<void>> = {
      'own object code (objects.ts)': async (round) => {
        const blob = await own.writeBlob(dir, Buffer.from(`${text}# ${round}\n`));
        const tree = await own.writeTree(
          dir,
          names.map((name, i) => ({ type: 'blob' as const, name, oid: i === 0 ? blob : blob })),
        );
        const root = await own.writeTree(dir, [{ type: 'tree', name: 'sessions', oid: tree }]);
        await own.writeCommit(dir, {
          tree: root,
          parents: [],
          author: person,
          committer: person,
          timestamp: person.timestamp + round,
          message: `create ${round}`,
        });
      },
      'isomorphic-git writeBlob/Tree/Commit': async (round) => {
        const blob = await git.writeBlob({ fs: gitFs, dir, blob: Buffer.from(`${text}# ${round}\n`) });
        const tree = await git.writeTree({
          fs: gitFs,
          dir,
          tree: names.map((path) => ({ mode: '100644', path, oid: blob, type: 'blob' as const })),
        });
        const root = await git.writeTree({
          fs: gitFs,
          dir,
          tree: [{ mode: '040000', path: 'sessions', oid: tree, type: 'tree' }],
        });
        await git.writeCommit({
          fs: gitFs,
          dir,
          commit: {
            tree: root,
            parent: [],
            author: { ...person, timestamp: person.timestamp + round },
            committer: { ...person, timestamp: person.timestamp + round },
            message: `create ${round}\n`,
          },
        });
      },
    };
    console.log(`\nobjects of one create, ${entries} sessions in the router's tree, ${ROUNDS} rounds:`);
    for (const [label, write] of Object.entries(variants)) {
      const times: number[] = [];
      const cpu = process.cpuUsage();
      for (let round = 0; round < ROUNDS; round++) {
        const start = performance.now();
        await write(round);
        times.push(performance.now() - start);
      }
      const used = process.cpuUsage(cpu);
      times.sort((a, b) => a - b);
      const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? 0;
      console.log(
        `  ${label.padEnd(38)} p50 ${at(0.5).toFixed(2)} ms, p99 ${at(0.99).toFixed(2)} ms, ` +
          `CPU ${((used.user + used.system) / 1000 / ROUNDS).toFixed(2)} ms a create`,
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--objects') {
  for (const n of [2500, 25000]) await benchObjects(n);
} else if (process.argv[2] === '--generate') {
  console.log(await generate(process.argv[3] as string, Number(process.argv[4] ?? 1000)));
} else if (process.argv[2] === '--measure') {
  await measure(process.argv[3] as string, Number(process.argv[4] ?? 0));
} else {
  const sizes = process.argv
    .slice(2)
    .map(Number)
    .filter((n) => n > 0);
  for (const n of sizes.length > 0 ? sizes : [1000, 10000]) await bench(n);
}
