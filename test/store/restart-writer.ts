/**
 * A controller process for the restart test: opens the store in <dir>, writes, closes, and prints what a
 * reader saw, so the test can compare it with a fresh process's view.
 */
import pino from 'pino';
import { createGitStore } from '../../controller/store/git/index.ts';
import { admin, newSession, pending, queued, routerSpec, user } from './fixtures.ts';

const dir = process.argv[2];
if (!dir) throw new Error('usage: restart-writer.ts <store dir>');
const store = createGitStore({ dir, logger: pino({ level: 'silent' }) });
await store.start();
await store.createRouter('ams1', routerSpec(2), admin);
const a = await store.createSession(newSession(4242420700, 'ams1'), queued, admin, 'create');
await store.createSession(
  newSession(64900, 'fra1', { endpoint: '[2a01:4f8::1]:51820' }),
  pending,
  user(64900),
  'create',
);
store.recordSessionMetrics(a.spec.uuid, {
  rtt: 1.5,
  rxBytes: 1,
  txBytes: 2,
  routesImported: 3,
  at: '2026-01-01T00:00:00.000Z',
});
store.recordRouterStatus('ams1', { agentVersion: '0.1.0', uptime: 42 });
await store.close();
console.log(
  JSON.stringify({
    routers: store.listRouters(),
    sessions: store.listSessions(),
    policies: store.listPolicies(),
  }),
);
