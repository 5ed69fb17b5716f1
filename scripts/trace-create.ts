/**
 * The create trace (docs/architecture.md, "The create trace"): which project files a peer's session
 * create runs, from the route to the commit, and the direction of each call between two of them
 * (scripts/call-trace.ts). A real controller on the real git store, in this process
 * (test/api/helpers.ts); after a few warm-up creates, one `POST /session` create less what the same
 * user's session list (`action: list`) runs (the request framing both share: auth, rate limit, schema
 * check, the answer's hooks), so what is left is the route, the state layer, the back end and the git
 * layer.
 *
 *   node scripts/trace-create.ts            (CREATES=200 profiled creates)
 */
import { driver, startHarness } from '../test/api/helpers.ts';
import { printTrace } from './call-trace.ts';

const h = await startHarness();
try {
  const agentToken = await h.addRouter('r1');
  const d = driver(h, 'r1', agentToken);
  for (let i = 0; i < 5; i++) await d.create();
  const user = d.freshUser();
  const list = () => h.post('/session', user, { action: 'list' });
  await list();
  await printTrace({
    dirs: ['common', 'controller'],
    what: 'create',
    baselineWhat: 'a read',
    baseline: async () => {
      await list();
    },
    run: async () => {
      await d.create(user);
    },
    // each profiled create with an ASN of its own
    profiledRun: async () => {
      await d.create();
    },
    runs: Number(process.env.CREATES ?? 200),
    fileTarget: 20,
  });
} finally {
  await h.close();
}
