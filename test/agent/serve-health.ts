/**
 * Runs the agent's local server (agent/server.ts) in whatever network namespace it is started in, with the
 * config passed as JSON in argv[2] and a fixed healthy source (no metrics); prints "listening" when ready.
 * Used by server-netns.test.ts through `ip netns exec`.
 */
import { Registry } from 'prom-client';
import { parseConfig } from '../../agent/config.ts';
import { startServer } from '../../agent/server.ts';

const config = parseConfig(JSON.parse(process.argv[2] ?? '{}'), 'argv');
const server = await startServer(config, {
  health: async () => ({ ok: true, bird: true, controller: true }),
  metrics: { registry: new Registry() },
});
process.stdout.write('listening\n');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
