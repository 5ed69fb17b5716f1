/**
 * The router's side of a session read while it changes (test/portal/key-rotation.test.ts,
 * review-on-router.test.ts): its BIRD protocol's state and since when, polled, for "did BGP restart".
 */
import os from 'node:os';
import { birdTimeApartMs } from '../support/bird-time.ts';
import type { BirdInstance } from '../support/netns.ts';

/** How often the router's BGP state is read while a session changes. */
export const POLL_MS = 200;

export interface BgpReading {
  state: string;
  since: string;
}

/** The router's BGP protocol of the session: its state and since when, as `birdc show protocols` says. */
export async function routerBgp(bird: BirdInstance, protocol: string): Promise<BgpReading> {
  const out = await bird.birdc(`show protocols ${protocol}`);
  const line = out.split('\n').find((l) => l.startsWith(`${protocol} `)) ?? '';
  // name  proto  table  state  since  info: the date and time are one or two columns
  const cols = line.trim().split(/\s+/);
  return { state: cols.at(-1) ?? '', since: cols.slice(4, -1).join(' ') };
}

/** Reads the router's BGP protocol every POLL_MS until stopped: what it saw, for "did it flap". */
export function pollBgp(
  bird: BirdInstance,
  protocol: string,
): { stop: () => Promise<(BgpReading & { at: number })[]> } {
  const seen: (BgpReading & { at: number })[] = [];
  let polling = true;
  const loop = (async () => {
    while (polling) {
      const at = Date.now();
      seen.push({
        at,
        ...(await routerBgp(bird, protocol).catch(() => ({ state: 'unreadable', since: '' }))),
      });
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  })();
  return {
    stop: async () => {
      polling = false;
      await loop;
      return seen;
    },
  };
}

/** The load average beside a figure: the machine is shared. */
export const loadAverage = (): string =>
  os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

/**
 * Did the protocol's `since` move (a restart, a state change)? Not for the millisecond BIRD's clock
 * conversion moves it between two queries (test/support/bird-time.ts).
 */
export function sinceMoved(before: string, after: string): boolean {
  if (before === after) return false;
  return !(birdTimeApartMs(after, before) < 100);
}
