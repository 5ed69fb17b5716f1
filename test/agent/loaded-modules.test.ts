/**
 * What loading the agent loads of Node (docs/benchmarks.md, The agent): none of undici and node:http2,
 * which an ESM import of node:http would bring in (agent/node-http.ts says why). A Node of its own
 * imports agent/main.ts, as `peerops agent` does, and prints the built-in modules it loaded.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const MAIN = join(import.meta.dirname, '..', '..', 'agent', 'main.ts');

describe('the agent', () => {
  it('loads neither undici nor node:http2', async () => {
    const script = `await import(${JSON.stringify(MAIN)}); console.log(JSON.stringify(process.moduleLoadList));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    const loaded = JSON.parse(stdout) as string[];
    expect(loaded).toContain('NativeModule http');
    expect(loaded.filter((m) => /undici|http2/.test(m))).toEqual([]);
  });
});
