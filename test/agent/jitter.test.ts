/** The wait between an agent's periodic heartbeats and reports (agent/agent.ts, jittered): ± 10 %. */
import { describe, expect, it } from 'vitest';
import { jittered } from '../../agent/agent.ts';

describe('jittered', () => {
  it('waits the interval ± 10 %, spread over the whole range', () => {
    expect(jittered(30_000, () => 0)).toBe(27_000);
    expect(jittered(30_000, () => 0.5)).toBe(30_000);
    expect(jittered(30_000, () => 0.999999)).toBe(33_000);
    const waits = Array.from({ length: 1000 }, () => jittered(30_000));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(27_000);
    expect(Math.max(...waits)).toBeLessThanOrEqual(33_000);
    // every second of the range is used: a fleet's agents fall out of step
    expect(new Set(waits.map((w) => Math.min(5, Math.floor((w - 27_000) / 1000)))).size).toBe(6);
  });
});
