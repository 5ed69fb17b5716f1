/**
 * The agent's looking-glass service alone (agent/looking-glass/service.ts: its long poll, its real ping),
 * as a child process whose commands run in the namespace PEEROPS_AGENT_NETNS names: a test with several
 * routers in several namespaces runs one each (the variable is per process). Needs no BIRD: only ping is
 * asked of it.
 *
 * usage: node test/support/lg-agent.ts URL ROUTER TOKEN
 */
import pino from 'pino';
import { BirdControl } from '../../agent/bird/control.ts';
import { LookingGlassService } from '../../agent/looking-glass/service.ts';
import { ControlPlaneClient } from '../../agent/sync/client.ts';

const [url = '', router = '', token = ''] = process.argv.slice(2);
const client = new ControlPlaneClient({
  url,
  router,
  token,
  requestTimeout: 5,
  maxRetries: 1,
  retryInitialDelay: 100,
  retryMaxDelay: 1000,
});
const stop = new AbortController();
process.once('SIGTERM', () => stop.abort());
console.log('polling');
await new LookingGlassService(
  client,
  new BirdControl('/nonexistent/bird.ctl'),
  pino({ level: 'silent' }),
).run(stop.signal);
