/**
 * `npm run lab` (as root): the whole product in network namespaces, step by step with timings
 * (test/e2e/lab-story.ts). Leaves nothing behind: on success, on a failure, and on Ctrl-C or SIGTERM.
 */
import { LabStory } from '../test/e2e/lab-story.ts';

if (process.getuid?.() !== 0) {
  console.error('npm run lab: run as root (it creates network namespaces, BIRD and WireGuard)');
  process.exit(2);
}

const story = new LabStory();
let stopping = false;
const onSignal = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  console.error(`\n${signal}: removing the lab's namespaces, processes and temp dirs …`);
  void story.cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

try {
  const result = await story.run();
  process.exitCode = result.missing.length ? 1 : 0;
} catch (err) {
  console.error(`lab failed: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  if (!stopping) {
    await story.cleanup();
    console.log('lab removed');
  }
}
