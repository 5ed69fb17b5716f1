/**
 * Per-session metrics (docs/agent.md, Metrics): RTT by `ping -6 -c <pingCount> -W <pingTimeout> <peer>%<iface>`
 * through the tunnel with a pool of pingWorkers, rx/tx bytes from `wg show <if> dump`, routes imported
 * from BIRD. RTT in milliseconds, null when the peer did not answer.
 */
import type { AgentSession, ReportBody } from '../../common/agent-api.ts';
import type { BirdControl } from '../bird/control.ts';
import { sessionProtocols } from '../bird/names.ts';
import { mapLimit } from '../../common/concurrency.ts';
import { parsePingAvg } from '../../common/ping.ts';
import { run } from '../system/exec.ts';
import { readInterface } from '../wireguard/interface.ts';
import { sessionLinkName, wantsUp } from '../reconcile/desired.ts';

export interface MetricOptions {
  pingCount: number;
  pingTimeout: number;
  pingWorkers: number;
}

export async function ping(target: string, iface: string, opts: MetricOptions): Promise<number | null> {
  const r = await run(
    'ping',
    ['-6', '-n', '-q', '-c', String(opts.pingCount), '-W', String(opts.pingTimeout), `${target}%${iface}`],
    {
      timeoutMs: (opts.pingCount * (opts.pingTimeout + 1) + 5) * 1000,
    },
  ).catch(() => undefined); // no ping on this router: no RTT (the preflight warned at start)
  return r ? parsePingAvg(r.stdout) : null;
}

export async function collectMetrics(
  sessions: readonly AgentSession[],
  bird: BirdControl,
  opts: MetricOptions,
): Promise<ReportBody> {
  const live = sessions.filter(wantsUp);
  let routes = new Map<string, { routesImported: number; routesExported: number }>();
  try {
    routes = new Map((await bird.protocols()).map((p) => [p.name, p]));
  } catch {
    // BIRD unreachable: routes count as 0 this round
  }
  const records = await mapLimit(live, opts.pingWorkers, async (s) => {
    const name = sessionLinkName(s);
    const link = await readInterface(name);
    const peer = link?.wg?.peers.find((p) => p.publicKey === s.publicKey);
    const rtt = link ? await ping(s.linkLocal, name, opts) : null;
    // the session's protocol and, for a peer without multiprotocol BGP, its IPv4 one
    const count = (field: 'routesImported' | 'routesExported') =>
      sessionProtocols(s).reduce((sum, p) => sum + (routes.get(p)?.[field] ?? 0), 0);
    return {
      uuid: s.uuid,
      rtt,
      rxBytes: peer?.rxBytes ?? 0,
      txBytes: peer?.txBytes ?? 0,
      routesImported: count('routesImported'),
      routesExported: count('routesExported'),
      lastHandshake: peer?.latestHandshake ? new Date(peer.latestHandshake * 1000).toISOString() : null,
    };
  });
  return { sessions: records };
}
