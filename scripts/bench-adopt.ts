/**
 * Adoption benchmark (docs/benchmarks.md, "Adopting a router"): one router set up by hand in the DN42
 * wiki's layout (test/agent/adopt/hand-made.ts) with N peers over userspace WireGuard (peerops-wireguard,
 * one host process per namespace) and real BIRD 2 on both sides. Measures the real `peerops adopt` plan,
 * the agent's takeover (its first reconcile pass over the adopted sessions: read, render, set aside, one
 * configure, links kept), and `peerops adopt --undo`, while BIRD's protocol `since` is polled every
 * 200 ms on both sides: a session that moves is a flap. Needs root (namespaces).
 *
 * Usage: npm run bench:adopt [-- 200] (default 200 peers)
 */
import { execFile } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  agentOn,
  agentSessions,
  flapWatch,
  handMadeRouter,
  planOf,
  undoOn,
} from '../test/agent/adopt/hand-made.ts';
import { NetnsLab } from '../test/support/netns.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');
const PEERS = Number(process.argv.slice(2).find((a) => Number(a) > 0) ?? 200);
/** Targets of issue 45. */
const TARGET = { planMs: 5000, takeoverMs: 30_000, flaps: 0 };

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

function line(what: string, figure: number, unit: string, target: number): boolean {
  const ok = figure <= target;
  console.log(
    `${what.padEnd(26)} ${`${figure} ${unit}`.padStart(10)}   target <= ${target} ${unit}   ${ok ? 'PASS' : 'FAIL'}   load ${load()}`,
  );
  return ok;
}

const { stdout } = await run('bash', [join(ROOT, 'scripts', 'build-wireguard-host.sh')], {
  timeout: 600_000,
});
process.env.PATH = `${stdout.trim().split('\n').at(-1) ?? ''}:${process.env.PATH ?? ''}`;
process.env.PEEROPS_WIREGUARD = 'peerops-wireguard';
const lab = new NetnsLab('adb');
let ok = true;
try {
  console.log(`adopt benchmark: ${PEERS} hand-made peers on one router (DN42 wiki layout), load ${load()}`);
  const setupStart = Date.now();
  const hand = await handMadeRouter(lab, 'wiki', PEERS);
  console.log(`hand-made router up, every session Established: ${Date.now() - setupStart} ms`);
  const planStart = Date.now();
  const plan = await planOf(hand);
  const planMs = Date.now() - planStart;
  if (plan.sessions.length !== PEERS)
    throw new Error(`the plan adopts ${plan.sessions.length} sessions, not ${PEERS}`);
  const agent = await agentOn(hand);
  const watch = flapWatch([
    { label: 'router', socket: hand.routerBird.socket },
    { label: 'peer', socket: hand.peerBird.socket },
  ]);
  const sessions = agentSessions(plan);
  await watch.ready;
  const takeoverStart = Date.now();
  const pass = await agent.reconciler.pass(sessions, hand.policy);
  const takeoverMs = Date.now() - takeoverStart;
  if (pass.failed.size) throw new Error(`takeover failed: ${[...pass.failed.values()][0]}`);
  const noopStart = Date.now();
  const noop = await agent.reconciler.pass(sessions, hand.policy);
  const noopMs = Date.now() - noopStart;
  agent.close();
  const undoStart = Date.now();
  await undoOn(hand);
  const undoMs = Date.now() - undoStart;
  // polls on after the undo's configure, so a session it dropped shows
  const { moves, polls, watched } = await watch.stop(3000);
  ok = line(`plan (${PEERS} peers)`, planMs, 'ms', TARGET.planMs) && ok;
  ok = line('takeover (first pass)', takeoverMs, 'ms', TARGET.takeoverMs) && ok;
  ok = line('undo', undoMs, 'ms', TARGET.takeoverMs) && ok;
  ok = line('BGP flaps, both sides', moves.length, 'flaps', TARGET.flaps) && ok;
  console.log(
    `takeover steps (ms): ${Object.entries(pass.stepMs)
      .map(([step, ms]) => `${step} ${Math.round(ms)}`)
      .join(', ')}`,
  );
  console.log(
    `next pass after the takeover: ${noopMs} ms, ${noop.writes} writes, configured ${noop.configured}; ` +
      `${polls} polls of ${watched} BGP protocols`,
  );
  if (moves.length) console.log(moves.slice(0, 10).join('\n'));
} finally {
  delete process.env.PEEROPS_WIREGUARD;
  await lab.cleanup();
}
process.exitCode = ok ? 0 : 1;
