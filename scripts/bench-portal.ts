/**
 * The web portal's weight and first load (`npm run bench:portal`; docs/benchmarks.md, "Portal"):
 *
 * - size: the script and stylesheet the page names, gzipped as the controller sends them (level 9);
 *   target under 60 KiB together. Each language but English is an asset fetched only for its readers
 *   (web/i18n/index.ts): printed apart, with what such a reader loads in all.
 * - first load on loopback, for an English reader and a Chinese one: `peerops serve` in a process of its own on a temp git store, listening on
 *   127.0.0.1, its portal files built before the runs (as a release has them baked in); Debian's
 *   chromium (playwright-core) in a
 *   fresh context per run (empty cache) loads `/`. Per run, in ms from the navigation's start (Navigation
 *   and Paint Timing): the page, script and stylesheet have arrived, the portal's code has rendered the login form (its `peerops:rendered` mark), the
 *   first contentful paint, and the end of the load event. Target: the load event's median under
 *   300 ms. The host's load average is printed beside the figures: on a shared machine it moves them.
 *
 * - the admin table with 10,000 sessions on a controller of its own: its first page and a search
 *   (scripts/bench-portal/admin-table.ts).
 *
 *   node scripts/bench-portal.ts [--runs 15]
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { buildPortal } from '../controller/portal/build.ts';
import { freePort } from '../test/support/ports.ts';
import { benchAdminTable } from './bench-portal/admin-table.ts';

const SIZE_TARGET_KIB = 60;
const LOAD_TARGET_MS = 300;

const { values } = parseArgs({ options: { runs: { type: 'string', default: '15' } } });
const runs = Number(values.runs);

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};
const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');

const files = await buildPortal();
// what every reader loads: the script and stylesheet index.html names
const pageAssets = [...files[0]!.body.matchAll(/(?:src|href)="\/(assets\/[^"]+)"/g)].map((m) => m[1]!);
const kib = (bytes: number) => (bytes / 1024).toFixed(1);
let gzTotal = 0;
const onDemand: { path: string; gz: number }[] = [];
console.log('Portal size (gzip level 9, as served):');
for (const f of files.filter((x) => x.path.startsWith('assets/'))) {
  const raw = Buffer.byteLength(f.body);
  const gz = gzipSync(f.body, { level: 9 }).length;
  const always = pageAssets.includes(f.path);
  if (always) gzTotal += gz;
  else onDemand.push({ path: f.path, gz });
  console.log(
    `  ${f.path.padEnd(28)} ${kib(raw).padStart(6)} KiB raw ${kib(gz).padStart(6)} KiB gzipped${always ? '' : ' (fetched on demand)'}`,
  );
}
const sizeOk = gzTotal / 1024 < SIZE_TARGET_KIB;
console.log(`  JS + CSS gzipped: ${kib(gzTotal)} KiB (target < ${SIZE_TARGET_KIB} KiB): ${verdict(sizeOk)}`);
for (const f of onDemand)
  console.log(
    `  with ${path.basename(f.path)} (its language's readers): ${kib(gzTotal + f.gz)} KiB (no target)`,
  );

const ROOT = path.resolve(import.meta.dirname, '..');
const data = await mkdtemp(path.join(tmpdir(), 'peerops-bench-portal-'));
const port = await freePort();
const url = `http://127.0.0.1:${port}/`;
const controller = spawn(process.execPath, [path.join(ROOT, 'bin', 'peerops.ts'), 'serve', '--data', data], {
  env: { ...process.env, PEEROPS_LISTEN: `127.0.0.1:${port}`, PEEROPS_LOG_LEVEL: 'warn' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium' });
try {
  for (let i = 0; ; i++) {
    const up = await fetch(`${url}livez`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (i > 300) throw new Error('the controller did not start within 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  await fetch(url); // the files are built on the first request; a release has them already
  const fmt = (xs: number[]) =>
    `median ${median(xs).toFixed(0)} ms, min ${Math.min(...xs).toFixed(0)}, max ${Math.max(...xs).toFixed(0)}`;
  // an English reader, then a Chinese one, whose page fetches its words before the first render
  const readers = [
    { name: 'English', locale: 'en-US', button: 'Get a challenge' },
    { name: 'Chinese', locale: 'zh-CN', button: '获取挑战' },
  ];
  let loadOk = true;
  for (const reader of readers) {
    const samples = {
      served: [] as number[],
      rendered: [] as number[],
      paint: [] as number[],
      load: [] as number[],
    };
    for (let i = 0; i < runs; i++) {
      const context = await browser.newContext({ locale: reader.locale });
      const page = await context.newPage();
      await page.goto(url, { waitUntil: 'load' });
      await page.getByRole('button', { name: reader.button }).waitFor();
      // a Chinese page paints after its words arrive, which can be after the load event
      await page.waitForFunction(`performance.getEntriesByName('first-contentful-paint').length > 0`);
      const t = await page.evaluate<{ served: number; rendered: number; paint: number; load: number }>(`({
      served: Math.max(...performance.getEntriesByType('resource').filter((r) => r.name.includes('/assets/')).map((r) => r.responseEnd)),
      rendered: performance.getEntriesByName('peerops:rendered')[0].startTime,
      paint: performance.getEntriesByName('first-contentful-paint')[0].startTime,
      load: performance.getEntriesByType('navigation')[0].loadEventEnd,
    })`);
      samples.served.push(t.served);
      samples.rendered.push(t.rendered);
      samples.paint.push(t.paint);
      samples.load.push(t.load);
      await context.close();
    }
    console.log(
      `First load on loopback, ${reader.name} reader, ${runs} runs, cold cache each (chromium ${browser.version()}, load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}):`,
    );
    console.log(`  page, scripts and style received: ${fmt(samples.served)}`);
    console.log(`  login form rendered:              ${fmt(samples.rendered)}`);
    console.log(`  first contentful paint:           ${fmt(samples.paint)}`);
    console.log(`  load event end:                   ${fmt(samples.load)}`);
    const ok = median(samples.load) < LOAD_TARGET_MS;
    loadOk &&= ok;
    console.log(`  target: load event end, median < ${LOAD_TARGET_MS} ms: ${verdict(ok)}`);
  }
  const tableOk = await benchAdminTable(browser, runs);
  process.exitCode = sizeOk && loadOk && tableOk ? 0 : 1;
} finally {
  await browser.close();
  controller.kill('SIGTERM');
  await new Promise((r) => controller.once('exit', r));
  await rm(data, { recursive: true, force: true });
}
