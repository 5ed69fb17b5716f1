/**
 * How the running controller's heap grows (docs/decisions.md, "The controller's heap growth"). V8 starts
 * a mark-compact once the old generation has grown by a factor it picks from how fast it collects
 * against how fast the program allocates. For the controller's index (a large heap that changes
 * slowly) it picks about 1.1: at 100,000 sessions, a 270 MiB heap, a mark-compact after every 30 MiB
 * promoted, three in the seconds of the scale benchmark's creates, each marking on the second core
 * while a create waits for its fsyncs. A fixed 1.5 makes them rarer for at most half the live heap
 * more.
 *
 * Set once the store has loaded, not on node's command line: the start keeps V8's own choice (it
 * allocates fast, and V8 then grows the heap by more), and the controller runs the same under every
 * launcher (the npm package, the Debian package, the image). V8 reads the flag at each collection.
 */
import { setFlagsFromString } from 'node:v8';

export const HEAP_GROWING_PERCENT = 50;

/** An option on node's command line names the growth itself: that one is kept. */
const GIVEN = /^--heap[-_]growing[-_]percent(=|$)/;

/** Fixes the heap's growth for the running controller; false when node's command line set it. */
export function fixHeapGrowth(execArgv: readonly string[] = process.execArgv): boolean {
  if (execArgv.some((arg) => GIVEN.test(arg))) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
