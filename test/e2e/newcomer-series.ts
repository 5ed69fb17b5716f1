/**
 * Real scrapes of the controller's /metrics as promtool `input_series`: every sample, named and labelled
 * as scraped, on a synthesized time axis (docs/operator-guide.md, "8. Monitoring"). Prometheus would
 * scrape every 15 s for minutes; the test scrapes a few times around an event, so each scrape stands
 * for one 15 s step and the last one of each phase is held until the phase ends.
 */

/** promtool's step; its rule evaluation runs at the same interval. */
export const STEP_SECONDS = 15;
/** How long the pre-event scrapes stand for, and the post-event ones. */
const BEFORE_STEPS = 20; // 5 min
const AFTER_STEPS = 16; // 4 min

/** `name{labels} value` lines of the Prometheus text format → series → value (finite values only). */
export function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    // the value is the last field but one when a timestamp follows; label values may hold spaces
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?)\s+(\S+)(?:\s+-?\d+)?$/.exec(line);
    const value = Number(m?.[2]);
    if (m?.[1] && Number.isFinite(value)) out.set(m[1], value);
  }
  return out;
}

/**
 * Every series seen in `before` or `after`, as promtool input: step i holds scrape i of its phase (the
 * last one held), `_` where a series was not yet there, `stale` where it was and is gone (Prometheus
 * writes a stale marker then). `eventAt` is the first post-event step's time in seconds.
 */
export function scrapeTimeline(
  before: readonly string[],
  after: readonly string[],
): { series: { series: string; values: string }[]; eventAt: number } {
  if (!before.length || !after.length) throw new Error('scrapeTimeline: a scrape before and after');
  const steps = [
    ...Array.from({ length: BEFORE_STEPS }, (_, i) => before[Math.min(i, before.length - 1)] ?? ''),
    ...Array.from({ length: AFTER_STEPS }, (_, i) => after[Math.min(i, after.length - 1)] ?? ''),
  ].map(samples);
  const names = new Set(steps.flatMap((s) => [...s.keys()]));
  const series = [...names].sort().map((name) => {
    let present = false;
    const values = steps.map((s) => {
      const v = s.get(name);
      if (v !== undefined) {
        present = true;
        return String(v);
      }
      const was = present;
      present = false;
      return was ? 'stale' : '_';
    });
    return { series: name, values: values.join(' ') };
  });
  return { series, eventAt: BEFORE_STEPS * STEP_SECONDS };
}
