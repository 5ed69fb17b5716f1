/**
 * The current time as an ISO 8601 string, formatted at most once per millisecond. Every agent request
 * stamps one (a heartbeat's lastHeartbeat, a report's time) and `new Date().toISOString()` cost about
 * 1 µs of each in `npm run bench:api`; the requests of one millisecond share the string instead.
 */
let lastMs = Number.NaN;
let lastIso = '';

export function isoNow(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}
