/** ping's output read by the agent's metrics and the controller's nearest-router probe (docs/agent.md, Metrics). */

/** Average RTT in ms from ping's summary (`rtt min/avg/max/mdev = a/b/c/d ms`), null when none. */
export function parsePingAvg(output: string): number | null {
  const m = /= [\d.]+\/([\d.]+)\//.exec(output);
  return m ? Number(m[1]) : null;
}
