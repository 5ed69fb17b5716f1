/**
 * Whether the router forwards packets. A router with forwarding off sets up every tunnel and BGP session
 * and still drops all transit traffic; BIRD cannot tell. The agent names what is off at start.
 */
import { run } from './exec.ts';

const SETTINGS = ['net.ipv6.conf.all.forwarding', 'net.ipv4.ip_forward'] as const;

/** The forwarding sysctls that are not 1 (empty: the router forwards both families). */
export async function forwardingOff(): Promise<string[]> {
  // No sysctl (procps not installed): the preflight has said so; nothing to check with.
  const r = await run('sysctl', ['-n', ...SETTINGS]).catch(() => undefined);
  if (r?.code !== 0) return [];
  const values = r.stdout.trim().split('\n');
  return SETTINGS.filter((_, i) => values[i]?.trim() !== '1');
}
