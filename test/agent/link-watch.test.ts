/**
 * The lines of `ip -o monitor link` the link watch reads (agent/wireguard/link-watch.ts), as iproute2
 * prints them; test/agent/restart.test.ts deletes a real tunnel under a running agent.
 */
import { describe, expect, it } from 'vitest';
import { deletedLink } from '../../agent/wireguard/link-watch.ts';

describe('deletedLink', () => {
  it('names the link of a deletion, with or without a parent after @', () => {
    expect(
      deletedLink(
        'Deleted 7: wg_20000: <POINTOPOINT,NOARP,UP,LOWER_UP> mtu 1420 qdisc noqueue state UNKNOWN group default \\    link/none ',
      ),
    ).toBe('wg_20000');
    expect(
      deletedLink(
        'Deleted 3: wg_20001@NONE: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN group default \\    link/ether 06:a2:14:3b:71:97 brd ff:ff:ff:ff:ff:ff',
      ),
    ).toBe('wg_20001');
  });

  it('ignores links added or changed', () => {
    expect(
      deletedLink(
        '3: wg_20001@vx1: <BROADCAST,MULTICAST,M-DOWN> mtu 1500 qdisc noop state DOWN group default \\    link/ether 06:a2:14:3b:71:97 brd ff:ff:ff:ff:ff:ff',
      ),
    ).toBeUndefined();
  });
});
