/**
 * controller/heap.ts on a real V8: a child node builds a live heap of about 300 MiB, asks for the fixed
 * growth, then promotes garbage; its --trace-gc lines say at what size each mark-compact started. The
 * growth is a fixed factor, so where the next mark-compact starts follows from the heap the last one
 * left, whatever the machine's speed (V8's own choice depends on how fast it collects).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { HEAP_GROWING_PERCENT } from '../../controller/heap.ts';

const run = promisify(execFile);
const HEAP_MODULE = join(import.meta.dirname, '../../controller/heap.ts');

const CHILD = `
const { fixHeapGrowth } = await import(${JSON.stringify(HEAP_MODULE)});
const live = [];
for (let i = 0; i < 2_000_000; i++) live.push({ a: i, b: [i, i], c: { d: i } });
console.log('fixed: ' + fixHeapGrowth());
// kept in a ring long enough to be promoted, then dropped
const ring = new Array(100_000);
for (let i = 0; i < 6_000_000; i++) ring[i % ring.length] = { v: i, w: [i, i, i, i] };
console.log('live: ' + live.length);
`;

/** What the child said of fixHeapGrowth, and each mark-compact after it: heap (MB) before it and after. */
async function churn(nodeArgs: string[]): Promise<{ fixed: string; compactions: [number, number][] }> {
  // a 1 MiB young generation: the sizes printed are the old generation's within a few MiB
  const { stdout } = await run(
    process.execPath,
    ['--max-semi-space-size=1', '--trace-gc', ...nodeArgs, '--input-type=module', '-e', CHILD],
    { maxBuffer: 1 << 26 },
  );
  const after = stdout.slice(stdout.indexOf('fixed: '));
  const fixed = /^fixed: (\w+)/.exec(after)?.[1] ?? '';
  const compactions = [...after.matchAll(/Mark-Compact ([\d.]+) \([\d.]+\) -> ([\d.]+) \(/g)].map(
    (m) => [Number(m[1]), Number(m[2])] as [number, number],
  );
  return { fixed, compactions };
}

/** Each mark-compact's starting heap over what the one before it left. */
const growths = (compactions: [number, number][]) =>
  compactions.slice(1).map(([before], i) => before / (compactions[i] as [number, number])[1]);

describe('the controller heap growth (controller/heap.ts)', () => {
  it(`lets the old generation grow by ${HEAP_GROWING_PERCENT} % between mark-compacts`, async () => {
    const { fixed, compactions } = await churn([]);
    expect(fixed).toBe('true');
    expect(compactions.length).toBeGreaterThanOrEqual(3);
    for (const growth of growths(compactions)) expect(growth).toBeGreaterThan(1.4);
  }, 60_000);

  it("keeps the growth node's command line names", async () => {
    const { fixed, compactions } = await churn(['--heap-growing-percent=10']);
    expect(fixed).toBe('false');
    expect(compactions.length).toBeGreaterThanOrEqual(3);
    for (const growth of growths(compactions)) expect(growth).toBeLessThan(1.2);
  }, 60_000);
});
