/**
 * The agent's own Prometheus registry (agent/metrics-registry.ts) against prom-client, which the
 * controller uses: the same metrics give the same samples, escaping and histogram included.
 */
import * as prom from 'prom-client';
import { describe, expect, it } from 'vitest';
import * as own from '../../agent/metrics-registry.ts';

type Lib = {
  Registry: new () => { metrics(): Promise<string> };
  Counter: new (o: object) => { inc(l?: object | number, by?: number): void };
  Gauge: new (o: object) => { set(l: object | number, v?: number): void; reset(): void };
  Histogram: new (o: object) => { observe(v: number): void };
};

async function exercise(lib: Lib): Promise<string> {
  const registry = new lib.Registry();
  const registers = [registry];
  const plain = new lib.Counter({ name: 'c_total', help: 'a counter\\with "quotes"\nand lines', registers });
  plain.inc(3);
  plain.inc();
  const labelled = new lib.Counter({ name: 'l_total', help: 'by result', labelNames: ['result'], registers });
  labelled.inc({ result: 'ok' });
  labelled.inc({ result: 'ok' }, 2);
  labelled.inc({ result: 'err"or\\' });
  new lib.Counter({ name: 'unused_total', help: 'labels, never counted', labelNames: ['x'], registers });
  new lib.Gauge({
    name: 'g',
    help: 'collected',
    labelNames: ['a', 'b'],
    registers,
    collect(this: { set(l: object, v: number): void; reset(): void }) {
      this.reset();
      this.set({ a: '1', b: 'x\ny' }, 0.125);
      this.set({ a: '2', b: '' }, -4);
    },
  });
  const h = new lib.Histogram({ name: 'h_seconds', help: 'a histogram', buckets: [0.5, 0.1, 1], registers });
  for (const v of [0.05, 0.1, 0.7, 3]) h.observe(v);
  return registry.metrics();
}

/** The samples of a text exposition, and each metric's HELP and TYPE, in a comparable order. */
function samples(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .sort();
}

describe('agent metrics registry', () => {
  it('exposes the same samples as prom-client', async () => {
    const ours = await exercise(own as unknown as Lib);
    const theirs = await exercise(prom as unknown as Lib);
    expect(samples(ours)).toEqual(samples(theirs));
    expect(ours).toMatch(/^h_seconds_bucket\{le="\+Inf"\} 4$/m);
  });
});
