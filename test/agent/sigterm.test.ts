/**
 * The real `peerops agent` process stops on SIGTERM within its grace even when a pass hangs: BIRD is
 * stopped (SIGSTOP), so the pass waits on BIRD's control socket far longer than the grace (each command
 * gives up after 10 s, and the pass goes on to the next). The agent exits with status 0, saying it left
 * the pass behind (docs/agent.md, "Stopping"), while BIRD is still stopped.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exec, waitFor } from '../support/netns.ts';
import { startAgentLab, type AgentLab } from './lab.ts';
import { freePort } from '../support/ports.ts';

let L: AgentLab;
let birdPid = 0;

beforeAll(async () => {
  L = await startAgentLab('ags');
  birdPid = Number((await readFile(join(L.bird.dir, 'bird.pid'), 'utf8')).trim());
});
afterAll(async () => {
  if (birdPid) process.kill(birdPid, 'SIGCONT');
  await L?.close();
});

/**
 * Whether a connection to BIRD's control socket holds bytes BIRD has not read (`ss`'s Recv-Q of BIRD's
 * end, or of its listening socket: connections not accepted yet): someone waits on the stopped BIRD.
 */
async function birdHasUnread(): Promise<boolean> {
  // `ss` here, not in the node namespace: that is where BIRD's control socket is listed
  const lines = (await exec('ss', ['-xnH'])).stdout.split('\n');
  return lines.some((l) => {
    const [, , recvQ, , local] = l.trim().split(/\s+/);
    return local === L.bird.socket && Number(recvQ) > 0;
  });
}

/** BIRD's state letter in /proc/<pid>/stat: `T` while stopped. */
const birdState = async () => / \(.*\) (\S) /.exec(await readFile(`/proc/${birdPid}/stat`, 'utf8'))?.[1];

describe('agent SIGTERM', () => {
  it('exits within its grace while a pass waits on a BIRD that does not answer', async () => {
    const peer = await L.addPeer('p0', 'fe80::21');
    const port = await freePort();
    const agent = L.spawnAgent({ listen: `127.0.0.1:${port}` });
    const metrics = async () =>
      (
        await fetch(`http://127.0.0.1:${port}/metrics`).then(
          (r) => r.text(),
          () => '',
        )
      ).toString();
    await waitFor(
      'a first pass',
      async () => /^peerops_agent_sync_pass_seconds_count [1-9]/m.test(await metrics()),
      30_000,
      200,
    ).catch((err: Error) => {
      throw new Error(`${err.message}:\n${agent.output().slice(-3000)}`);
    });
    process.kill(birdPid, 'SIGSTOP');
    // the signal is delivered asynchronously: under load BIRD may still show as running for a moment
    await waitFor('BIRD stopped', async () => (await birdState()) === 'T', 10_000, 20);
    // An approved session wakes the agent's long poll: the pass that follows asks BIRD and gets no answer.
    await L.approvedSession(peer);
    await waitFor('a command to BIRD that BIRD has not read', birdHasUnread, 30_000, 100);
    const exited = new Promise<number | null>((resolve) => agent.child.once('exit', (code) => resolve(code)));
    const t0 = performance.now();
    agent.child.kill('SIGTERM');
    const code = await Promise.race([
      exited,
      new Promise<'running'>((r) => setTimeout(() => r('running'), 15_000)),
    ]);
    const seconds = (performance.now() - t0) / 1000;
    expect(code, `still running 15 s after SIGTERM:\n${agent.output().slice(-3000)}`).toBe(0);
    console.log(`agent exited ${seconds.toFixed(1)} s after SIGTERM with a pass waiting on BIRD`);
    expect(await birdState()).toBe('T'); // the pass was still waiting when the process ended
    expect(agent.output()).toContain('"msg":"a pass or report was still under way at shutdown; left behind"');
  }, 120_000);
});
