/**
 * An operator's local.d file that defines a protocol named like a session being set up (real BIRD and
 * WireGuard in namespaces, the real agent process): that session is SETUP_FAILED with BIRD's words
 * naming the local.d file and line, the other session comes up, and once the operator removes the file
 * the session is set up on its next retry (docs/agent.md, "When something is wrong").
 */
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/netns.ts';
import { startAgentLab, type AgentLab } from './lab.ts';

let L: AgentLab;

beforeAll(async () => {
  L = await startAgentLab('agc');
});
afterAll(async () => {
  await L?.close();
});

describe('a local.d protocol named like a session', () => {
  it('fails that setup naming the file, leaves the other session alone, and clears once removed', async () => {
    const clashing = await L.addPeer('pc', 'fe80::31');
    const other = await L.addPeer('po', 'fe80::32');
    const clashUuid = await L.approvedSession(clashing);
    const otherUuid = await L.approvedSession(other);
    const clashPort = L.h.store.getSession(clashUuid)!.spec.listenPort;
    const otherPort = L.h.store.getSession(otherUuid)!.spec.listenPort;
    await L.connectPeer(clashing, clashPort);
    await L.connectPeer(other, otherPort);
    const file = join(L.config.birdConfigRoot, 'local.d', 'operator.conf');
    await writeFile(file, `# the operator's own\n\nprotocol static dn42_${clashPort} {\n  ipv6;\n}\n`);

    const agent = L.spawnAgent();
    const session = (uuid: string) => L.h.store.getSession(uuid)?.status;
    await waitFor(
      'the clashing session SETUP_FAILED',
      async () => session(clashUuid)?.code === 6,
      60_000,
      200,
    ).catch((err: Error) => {
      throw new Error(`${err.message}:\n${agent.output().slice(-3000)}`);
    });
    const lastError = session(clashUuid)?.lastError;
    expect(lastError?.code).toBe('SETUP_FAILED');
    // BIRD's own words: the operator's file, its line and column, the name defined twice
    expect(lastError?.message).toMatch(new RegExp(`^${file}:3:\\d+ .*dn42_${clashPort}.* already`));
    await waitFor('the other session ACTIVE', async () => session(otherUuid)?.code === 1, 60_000, 200);
    // the node itself is fine: no ConfigApplied=False for a clash a setup caused
    expect(agent.output()).not.toContain('because of a file no session owns');

    await rm(file);
    // the next retry (5 s after the failure, docs/agent.md) sets it up
    await waitFor(
      'the session ACTIVE once the file is gone',
      async () => session(clashUuid)?.code === 1,
      60_000,
      200,
    );
    expect(session(clashUuid)?.lastError).toBeFalsy();
    await agent.kill('SIGTERM');
  }, 180_000);
});
