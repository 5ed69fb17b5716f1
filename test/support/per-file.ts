/**
 * A real part started once for a test file: `start` in a beforeAll registered where the file calls
 * this (first, at its top, so the file's own beforeAll can use it) and `stop` in an afterAll that runs
 * after the file's own (vitest runs after-hooks in reverse). The object returned stands for the part
 * once it has started; using it before throws.
 */
import { afterAll, beforeAll } from 'vitest';

export function perFile<T extends object>(
  start: () => Promise<T>,
  stop: (part: T) => Promise<void>,
  timeoutMs?: number,
): T {
  let part: T | undefined;
  beforeAll(async () => {
    part = await start();
  }, timeoutMs);
  afterAll(async () => {
    if (part) await stop(part);
  });
  return new Proxy({} as T, {
    get(_target, name) {
      if (!part) throw new Error(`used before its beforeAll started it (${String(name)})`);
      const value: unknown = Reflect.get(part, name);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(part) : value;
    },
  });
}
