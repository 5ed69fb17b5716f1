/**
 * A looking-glass command run under its bounds (docs/agent.md, Looking glass): killed when it runs past
 * its time, cut (and killed) when it prints more than its output limit. Arguments go to execve as a list
 * (agent/system/exec.ts wrap): no shell.
 */
import { spawn } from 'node:child_process';
import { wrap } from '../system/exec.ts';

export interface Bounds {
  timeMs: number;
  outputBytes: number;
}

export interface BoundedResult {
  output: string;
  truncated: boolean;
  timedOut: boolean;
  exitCode: number;
}

/** Runs `cmd` with stdout and stderr joined; rejects only when it cannot start (not installed: ENOENT). */
export function runBounded(cmd: string, args: readonly string[], bounds: Bounds): Promise<BoundedResult> {
  const [file, argv] = wrap(cmd, args);
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;
    let timedOut = false;
    const take = (chunk: Buffer) => {
      if (truncated) return;
      const room = bounds.outputBytes - size;
      if (chunk.length > room) {
        chunks.push(chunk.subarray(0, room));
        size = bounds.outputBytes;
        truncated = true;
        child.kill('SIGKILL');
        return;
      }
      chunks.push(chunk);
      size += chunk.length;
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, bounds.timeMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({
        output: cutUtf8(Buffer.concat(chunks)),
        truncated,
        timedOut,
        exitCode: code ?? (signal ? 128 : -1),
      });
    });
  });
}

/** The bytes as text, without a character split at the cut (its partial bytes are dropped). */
export function cutUtf8(bytes: Buffer): string {
  let end = bytes.length;
  // back over continuation bytes to the last character's first byte; drop it if incomplete
  let i = end - 1;
  while (i >= 0 && i > end - 4 && (bytes[i]! & 0xc0) === 0x80) i--;
  if (i >= 0) {
    const lead = bytes[i]!;
    const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (end - i < need) end = i;
  }
  return bytes.subarray(0, end).toString('utf8');
}
