/**
 * The report load of bench:api's user-list scenario (user-list.ts): every router's agent sending its
 * sessions' metrics once per interval, as agent/agent.ts does (controlPlane.metricInterval, 60 s), the
 * routers spread evenly over the interval. Its own process: wrk's runs block the bench's event loop.
 *
 * Run as `node reporter.ts URL ROUTERS_FILE SECONDS`; ROUTERS_FILE holds [{name, token, uuids}]. Prints
 * `ready` once running, and on SIGTERM a JSON line {sent, failed} before it exits.
 */
import { readFileSync } from 'node:fs';

interface ReportingRouter {
  name: string;
  token: string;
  uuids: string[];
}

const [url, routersFile, seconds] = process.argv.slice(2);
const routers = JSON.parse(readFileSync(routersFile as string, 'utf8')) as ReportingRouter[];
const intervalMs = Number(seconds) * 1000;
let sent = 0;
let failed = 0;
let bytes = 0;

async function report(router: ReportingRouter): Promise<void> {
  bytes += 1500;
  const sessions = router.uuids.map((uuid) => ({
    uuid,
    rtt: 12,
    rxBytes: bytes,
    txBytes: bytes * 2,
    routesImported: 40,
    lastHandshake: new Date().toISOString(),
  }));
  try {
    const res = await fetch(`${url}/agent/${router.name}/report`, {
      method: 'POST',
      headers: { authorization: `Bearer ${router.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sessions }),
    });
    await res.arrayBuffer();
    if (res.ok) sent++;
    else failed++;
  } catch {
    failed++;
  }
}

const timers = routers.map((router, i) =>
  setTimeout(
    () => {
      void report(router);
      timers[i] = setInterval(() => void report(router), intervalMs);
    },
    (i * intervalMs) / routers.length,
  ),
);
process.on('SIGTERM', () => {
  for (const timer of timers) clearTimeout(timer);
  console.log(JSON.stringify({ sent, failed }));
  process.exit(0);
});
console.log('ready');
