/** Waiting for a `peerops serve` started as a child process to answer `/health`. */
import type { ChildProcess } from 'node:child_process';

/**
 * Resolves once `${base}/health` answers 2xx; throws with `output()` (the child's recent output) when the
 * child exits first or `timeoutMs` passes.
 */
export async function waitForHealth(
  base: string,
  child: ChildProcess,
  opts: { name: string; timeoutMs: number; intervalMs: number; output: () => string },
): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  for (;;) {
    const ok = await fetch(`${base}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error(`${opts.name} did not start:\n${opts.output()}`);
    await new Promise((r) => setTimeout(r, opts.intervalMs));
  }
}
