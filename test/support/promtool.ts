/** promtool (Debian package prometheus, a test prerequisite) on a text given on stdin. */
import { spawn } from 'node:child_process';

/** Runs promtool with `args`, `input` on stdin: its exit code and everything it printed. */
export function promtool(args: string[], input: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', args);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
    child.stdin.end(input);
  });
}
