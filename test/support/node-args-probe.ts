/**
 * What node's command line held in each node process a command ran, however it was started (a launcher,
 * `#!/usr/bin/env node`, the bundle running itself again): a preload script in NODE_OPTIONS appends
 * each process's pid and process.execArgv to a file. Node passes NODE_OPTIONS on to the process it
 * replaces itself with, so both sides of a re-exec are seen.
 */
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface NodeProcessSeen {
  pid: number;
  execArgv: string[];
}

export interface NodeArgsProbe {
  /** What to add to the command's environment: the probe's NODE_OPTIONS. */
  env: NodeJS.ProcessEnv;
  /** The node processes seen so far, in start order. */
  seen(): Promise<NodeProcessSeen[]>;
}

/** A probe whose files are in `dir`. */
export async function nodeArgsProbe(dir: string): Promise<NodeArgsProbe> {
  const id = randomBytes(4).toString('hex');
  const script = join(dir, `node-args-probe-${id}.cjs`);
  const out = join(dir, `node-args-probe-${id}.jsonl`);
  await writeFile(
    script,
    `require('node:fs').appendFileSync(${JSON.stringify(out)}, JSON.stringify({ pid: process.pid, execArgv: process.execArgv }) + '\\n');\n`,
  );
  await writeFile(out, '');
  return {
    env: { NODE_OPTIONS: `--require ${script}` },
    seen: async () =>
      (await readFile(out, 'utf8'))
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as NodeProcessSeen),
  };
}
