/**
 * The BGP timers of an eBGP session, for both ends: the router's template (agent/bird/main-config.ts) and
 * the files generated for the peer (common/peer-config). Why each value, and why it is safe with any
 * peer's software: docs/routing-policy.md, "BGP timers". In seconds.
 */
export const BGP_TIMERS = {
  /** Wait before the first connection of a session and after a connection closes (BIRD: 5). */
  connectDelay: 1,
  /** Wait before a connection attempt nobody answered is made again (BIRD and FRR: 120). */
  connectRetry: 5,
  /**
   * After a BGP error (hold timer expired, a notification other than Cease, a route limit), the
   * session stays down this long, refusing connections too; doubled on each error in a row up to the
   * maximum (BIRD: 60 and 300). The maximum stays BIRD's, so a session that keeps failing settles at
   * BIRD's own pace.
   */
  errorWait: { min: 2, max: 300 },
  /**
   * The peer's keepalive and hold times. The hold time is the lower of both ends' (the router keeps
   * BIRD's 240), so the peer's decides; the keepalive is sent by the peer whatever the router's.
   */
  keepalive: 5,
  hold: 30,
} as const;

/** BIRD's lines for the connection timers both ends set. */
export function birdConnectTimers(): string[] {
  const t = BGP_TIMERS;
  return [
    `connect delay time ${t.connectDelay};`,
    `connect retry time ${t.connectRetry};`,
    `error wait time ${t.errorWait.min}, ${t.errorWait.max};`,
  ];
}
