/**
 * `npm run lab` (as root): the whole product in network namespaces, step by step with timings
 * (test/e2e/lab-story.ts), with where each approval → BGP Established went. `npm run lab -- --runs 3`
 * walks the story 3 times and prints every approval → Established time, their p50 and the breakdown's
 * medians over all runs. Leaves nothing behind: on success, on a failure, and on Ctrl-C or SIGTERM.
 */
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { formatPhases, LabStory, median } from '../test/e2e/lab-story.ts';
import { phaseMedians, type SetupTimeline } from '../test/e2e/setup-timeline.ts';

if (process.getuid?.() !== 0) {
  console.error('npm run lab: run as root (it creates network namespaces, BIRD and WireGuard)');
  process.exit(2);
}

const { values } = parseArgs({ options: { runs: { type: 'string', default: '1' } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1) {
  console.error(`npm run lab: --runs must be a whole number of at least 1, not '${values.runs}'`);
  process.exit(2);
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
console.log(`machine: ${availableParallelism()} cores, load average ${load()}; ${new Date().toISOString()}`);

let story: LabStory | undefined;
let stopping = false;
const onSignal = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  console.error(`\n${signal}: removing the lab's namespaces, processes and temp dirs …`);
  void (story?.cleanup() ?? Promise.resolve()).finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

const times: number[] = [];
const timelines: SetupTimeline[] = [];
process.exitCode = 0;
for (let run = 1; run <= runs && !stopping; run++) {
  if (runs > 1) console.log(`\n--- run ${run} of ${runs} ---`);
  story = new LabStory();
  try {
    const result = await story.run();
    times.push(...result.approvalToEstablishedMs);
    timelines.push(...result.timelines);
    if (result.missing.length) process.exitCode = 1;
  } catch (err) {
    console.error(`lab failed: ${(err as Error).message}`);
    process.exitCode = 1;
  } finally {
    if (!stopping) {
      await story.cleanup();
      console.log('lab removed');
    }
  }
}

if (runs > 1 && times.length) {
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  console.log(
    `\napproval → BGP Established over ${runs} runs: ${times.map(s).join(', ')}; p50 ${s(median(times))} (target < 1 s)`,
  );
  console.log(formatPhases('breakdown, medians over all runs', phaseMedians(timelines, median)));
}
console.log(`machine: load average ${load()} at the end`);
