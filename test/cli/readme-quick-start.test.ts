/**
 * The operators' shell block of the README's quick start, run as written by bash, command after command
 * with `set -e`, against a temporary HOME and data dir. What the test changes, and why:
 *   - `npm install -g ./peerops-0.1.0.tgz` is left out: `peerops` on PATH runs this checkout (a test
 *     double for the installed package, whose install test/package/install.test.ts runs);
 *   - the data dir, the registry (the DN42 fixture), the port (PEEROPS_LISTEN, as the README says)
 *     and the router's `<key>` placeholder are replaced, since /var/lib and port 8080 are not the test's.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, mkdir, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NO_OWN_PREFIX_WARNING } from '../../common/rules/policy.ts';
import { wgKey } from '../api/helpers.ts';
import { freePort } from '../support/ports.ts';

let dir: string | undefined;
let servePid: number | undefined;

/** Whether the process is still there (signal 0 only asks). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

afterAll(async () => {
  // the controller commits its queued writes on SIGTERM: its data dir is removed once it is gone
  if (servePid !== undefined && alive(servePid)) {
    process.kill(servePid, 'SIGTERM');
    const deadline = Date.now() + 15_000;
    while (alive(servePid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    if (alive(servePid)) process.kill(servePid, 'SIGKILL');
  }
  if (dir) await rm(dir, { recursive: true, force: true });
}, 20_000);

/** The first ```sh block after `heading` in README.md. */
async function shellBlock(heading: string): Promise<string> {
  const readme = await readFile('README.md', 'utf8');
  const at = readme.indexOf(heading);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(at))?.[1];
  if (at < 0 || block === undefined) throw new Error(`README.md has no sh block after '${heading}'`);
  return block;
}

describe("the README's quick start", () => {
  it("the operators' block runs as written: a controller, an admin context, the policy, a router", async () => {
    dir = await mkdtemp(join(tmpdir(), 'peerops-quick-start-'));
    const port = await freePort();
    const bin = join(dir, 'bin');
    await mkdir(bin);
    await writeFile(
      join(bin, 'peerops'),
      `#!/bin/sh\nexec '${process.execPath}' '${resolve('bin/peerops.ts')}' "$@"\n`,
    );
    await chmod(join(bin, 'peerops'), 0o755);

    const block = await shellBlock('## Quick start');
    const commands = block
      .split('\n')
      .filter((line) => !line.startsWith('npm install -g '))
      .join('\n')
      .replaceAll('/var/lib/peerops', join(dir, 'data'))
      .replaceAll('/srv/dn42-registry', resolve('test/fixtures/dn42-registry'))
      .replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)
      .replaceAll('<key>', wgKey());
    expect(commands).toContain('peerops serve --data');
    // the serve in the background keeps the output files open: wait for bash's exit, not its pipes
    const log = await open(join(dir, 'out.log'), 'w');
    const started = Date.now();
    const code = await new Promise<number | null>((done) => {
      // the serve's pid said on any exit: a failing step must not leave the controller running
      const bash = spawn('bash', ['-ec', `trap 'echo "serve pid $!"' EXIT\n${commands}`], {
        env: {
          PATH: `${bin}:${process.env.PATH ?? ''}`,
          HOME: join(dir ?? '', 'home'),
          PEEROPS_LISTEN: `127.0.0.1:${port}`,
          PEEROPS_STORE: 'git',
        },
        stdio: ['ignore', log.fd, log.fd],
      });
      bash.once('exit', done);
    });
    await log.close();
    const out = await readFile(join(dir, 'out.log'), 'utf8');
    servePid = Number(/serve pid (\d+)/.exec(out)?.[1]) || undefined;
    console.log(`README quick start: ${Date.now() - started} ms`);
    expect(code, out).toBe(0);
    expect(out).toContain('policy default saved');
    expect(out).toContain('router fra1 added');
    // the block names the network's prefixes: no warning after its policy step
    expect(out.slice(out.indexOf('policy default saved'))).not.toContain(NO_OWN_PREFIX_WARNING);
  }, 60_000);
});
