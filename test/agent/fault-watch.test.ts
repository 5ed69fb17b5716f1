/**
 * Which BGP moves make the fault watch wake a pass (agent/fault-watch.ts; docs/agent.md, "When something is
 * wrong"). BIRD's answers are given by the test rather than by a running BIRD: the moves between its
 * trying states come from its connect retry timer, which a real BIRD cannot be made to step through on
 * cue; test/agent/faults.test.ts covers the watch with a real BIRD and WireGuard.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { FaultWatch } from '../../agent/fault-watch.ts';

/** One look of a fresh watch: BIRD answers `now`, the last pass judged `judged`; the passes it asked for. */
async function passesAsked(judged: Record<string, string>, now: Record<string, string>): Promise<string[]> {
  const asked: string[] = [];
  const watch = new FaultWatch(
    { bgpStates: () => Promise.resolve(new Map(Object.entries(now))) },
    { bgp: () => new Map(Object.entries(judged)), handshakeDeadline: () => undefined },
    { birdChanged: () => undefined, passNeeded: (why) => asked.push(why) },
    pino({ level: 'silent' }),
  );
  watch.start();
  await new Promise((resolve) => setTimeout(resolve, 50));
  watch.stop();
  return asked;
}

describe('the fault watch wakes a pass', () => {
  it.each([
    ['Established', 'Active'],
    ['Established', 'Connect'],
    ['Active', 'Established'],
    ['Established', ''],
  ])('when BGP goes from %s to %s', async (judged, now) => {
    expect(await passesAsked({ dn42_1: judged }, now ? { dn42_1: now } : {})).toHaveLength(1);
  });

  it.each([
    ['Active', 'Connect'],
    ['Connect', 'Active'],
    ['Idle', 'Connect'],
    ['Active', 'OpenSent'],
  ])('not when BIRD only retries: %s to %s', async (judged, now) => {
    expect(await passesAsked({ dn42_1: judged }, { dn42_1: now })).toEqual([]);
  });
});
