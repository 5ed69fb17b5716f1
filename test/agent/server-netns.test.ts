/**
 * The agent's local server on a non-loopback address, in a network namespace: a client whose address is in
 * `server.allowFrom` gets /health, another client on the same link gets its connection closed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { NetnsLab, waitFor } from '../support/netns.ts';

const lab = new NetnsLab('asv');
afterAll(() => lab.cleanup());

describe('agent local server from other hosts', () => {
  it('answers allowFrom and closes the connection of everyone else', async () => {
    const router = await lab.namespace('router');
    const allowed = await lab.namespace('allowed');
    const stranger = await lab.namespace('stranger');
    await lab.veth(router, allowed, { a: 'fd00:77:1::1/64', b: 'fd00:77:1::2/64' });
    await lab.veth(router, stranger, { a: 'fd00:77:2::1/64', b: 'fd00:77:2::2/64' });
    const port = lab.uniquePort();
    const config = {
      server: { listen: `[::]:${port}`, allowFrom: ['fd00:77:1::2'] },
      node: { name: 'fra1' },
      // the controller's address is allowed too: one that exists nowhere here
      controlPlane: { url: 'http://[fd00:77:9::9]:8080', token: 'a-very-secret-agent-token' },
    };
    const server = lab.spawn(router, process.execPath, [
      new URL('./serve-health.ts', import.meta.url).pathname,
      JSON.stringify(config),
    ]);
    let out = '';
    server.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor('the agent server', () => out.includes('listening'), 20_000);

    const curl = (ns: typeof allowed, host: string) =>
      ns.exec('curl', [
        '-s',
        '-m',
        '5',
        '-o',
        '/dev/null',
        '-w',
        '%{http_code}',
        `http://[${host}]:${port}/health`,
      ]);
    const fromAllowed = await curl(allowed, 'fd00:77:1::1');
    expect(fromAllowed.stdout).toBe('200');
    const fromStranger = await curl(stranger, 'fd00:77:2::1');
    // curl: 52 "empty reply from server" (the connection was closed without an answer), or 56 (reset)
    expect([52, 56]).toContain(fromStranger.code);
    expect(fromStranger.stdout).toBe('000');
    // loopback inside the router's own namespace is always allowed
    expect((await curl(router, '::1')).stdout).toBe('200');
  });
});
