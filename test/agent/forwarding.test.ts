/** agent/system/forwarding.ts against the sysctls of a real network namespace standing for the router. */
import { afterAll, describe, expect, it } from 'vitest';
import { forwardingOff } from '../../agent/system/forwarding.ts';
import { NetnsLab } from '../support/netns.ts';

const lab = new NetnsLab('afw');
afterAll(async () => {
  delete process.env.PEEROPS_AGENT_NETNS;
  await lab.cleanup();
});

describe('IP forwarding check', () => {
  it('names each forwarding sysctl that is off, and nothing once both are on', async () => {
    const router = await lab.namespace('router');
    process.env.PEEROPS_AGENT_NETNS = router.name;
    await router.run('sysctl', ['-q', '-w', 'net.ipv6.conf.all.forwarding=0', 'net.ipv4.ip_forward=0']);
    expect(await forwardingOff()).toEqual(['net.ipv6.conf.all.forwarding', 'net.ipv4.ip_forward']);
    await router.run('sysctl', ['-q', '-w', 'net.ipv6.conf.all.forwarding=1']);
    expect(await forwardingOff()).toEqual(['net.ipv4.ip_forward']);
    await router.run('sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']);
    expect(await forwardingOff()).toEqual([]);
  });
});
