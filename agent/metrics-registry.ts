/**
 * The few metric kinds the agent serves (counter, gauge, histogram) in Prometheus' text format 0.0.4.
 * Not prom-client, whose 330 kB of code (with its optional OpenTelemetry import) the agent would load
 * for a dozen series on a router with a tight memory budget (docs/decisions.md). Same call shapes as
 * prom-client where the agent uses them.
 */

type Labels = Record<string, string>;

export interface MetricOptions<L extends string, M = unknown> {
  name: string;
  help: string;
  labelNames?: readonly L[];
  registers?: Registry[];
  /** Runs before each scrape (read the value from the agent's state); `this` is the metric. */
  collect?(this: M): void | Promise<void>;
}

interface Renderable {
  render(): Promise<string>;
}

export class Registry {
  readonly contentType = 'text/plain; version=0.0.4; charset=utf-8';
  private readonly metricsList: Renderable[] = [];

  register(metric: Renderable): void {
    this.metricsList.push(metric);
  }

  async metrics(): Promise<string> {
    return (await Promise.all(this.metricsList.map((m) => m.render()))).join('\n') + '\n';
  }
}

const escapeHelp = (s: string) => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
const escapeValue = (s: string) => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

function labelText(labels: Labels, extra?: [string, string]): string {
  const pairs = Object.entries(labels);
  if (extra) pairs.push(extra);
  return pairs.length ? `{${pairs.map(([k, v]) => `${k}="${escapeValue(v)}"`).join(',')}}` : '';
}

function numberText(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

const keyOf = (labels: Labels) => JSON.stringify(Object.entries(labels).sort());

/** Counter and gauge: one value per label set. */
abstract class Scalar<L extends string> implements Renderable {
  protected abstract readonly type: 'counter' | 'gauge';
  private readonly values = new Map<string, { labels: Labels; value: number }>();
  private readonly opts: MetricOptions<L, this>;

  constructor(opts: MetricOptions<L, Scalar<L>>) {
    this.opts = opts;
    // like prom-client: a series without labels exists (at 0) from the start
    if (!opts.labelNames?.length) this.values.set(keyOf({}), { labels: {}, value: 0 });
    for (const r of opts.registers ?? []) r.register(this);
  }

  protected add(labels: Partial<Record<L, string>>, by: number, replace: boolean): void {
    const l = labels as Labels;
    const key = keyOf(l);
    const cur = this.values.get(key);
    if (cur) cur.value = replace ? by : cur.value + by;
    else this.values.set(key, { labels: l, value: by });
  }

  reset(): void {
    this.values.clear();
    if (!this.opts.labelNames?.length) this.values.set(keyOf({}), { labels: {}, value: 0 });
  }

  async render(): Promise<string> {
    await this.opts.collect?.call(this);
    const { name, help } = this.opts;
    const lines = [`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${this.type}`];
    for (const { labels, value } of this.values.values())
      lines.push(`${name}${labelText(labels)} ${numberText(value)}`);
    return lines.join('\n');
  }
}

export class Counter<L extends string = string> extends Scalar<L> {
  protected readonly type = 'counter';
  constructor(opts: MetricOptions<L, Counter<L>>) {
    super(opts);
  }
  inc(labelsOrBy?: Partial<Record<L, string>> | number, by = 1): void {
    if (typeof labelsOrBy === 'number') this.add({}, labelsOrBy, false);
    else this.add(labelsOrBy ?? {}, by, false);
  }
}

export class Gauge<L extends string = string> extends Scalar<L> {
  protected readonly type = 'gauge';
  constructor(opts: MetricOptions<L, Gauge<L>>) {
    super(opts);
  }
  set(labelsOrValue: Partial<Record<L, string>> | number, value?: number): void {
    if (typeof labelsOrValue === 'number') this.add({}, labelsOrValue, true);
    else this.add(labelsOrValue, value ?? 0, true);
  }
}

/** A histogram without labels: cumulative buckets, sum and count. */
export class Histogram implements Renderable {
  private readonly opts: MetricOptions<never, Histogram> & { buckets: readonly number[] };
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(opts: MetricOptions<never, Histogram> & { buckets: readonly number[] }) {
    this.opts = { ...opts, buckets: [...opts.buckets].sort((a, b) => a - b) };
    this.counts = this.opts.buckets.map(() => 0);
    for (const r of opts.registers ?? []) r.register(this);
  }

  observe(value: number): void {
    this.opts.buckets.forEach((le, i) => {
      if (value <= le) this.counts[i]!++;
    });
    this.sum += value;
    this.count++;
  }

  async render(): Promise<string> {
    const { name, help, buckets } = this.opts;
    const lines = [`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} histogram`];
    buckets.forEach((le, i) => lines.push(`${name}_bucket{le="${numberText(le)}"} ${this.counts[i]}`));
    lines.push(
      `${name}_bucket{le="+Inf"} ${this.count}`,
      `${name}_sum ${this.sum}`,
      `${name}_count ${this.count}`,
    );
    return Promise.resolve(lines.join('\n'));
  }
}
