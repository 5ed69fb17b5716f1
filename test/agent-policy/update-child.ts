/**
 * A stand-in for the agent process in the self-update test: runs one update check with the real
 * updater and its default restart (exit with RESTART_EXIT_CODE), as the agent's timer would.
 * Arguments come as JSON in PEEROPS_TEST_UPDATE.
 */
import { autoUpdateFrom } from './update-controller.ts';
import { checkForUpdate } from '../../agent/update/updater.ts';

const args = JSON.parse(process.env.PEEROPS_TEST_UPDATE ?? '{}') as {
  controlPlane: string;
  releaseRepo: string;
  installPath: string;
  currentVersion: string;
  publicKeys: string[];
};
const outcome = await checkForUpdate({
  local: {
    enabled: true,
    checkInterval: 60,
    channel: 'stable',
    releaseRepo: args.releaseRepo,
    publicKeys: args.publicKeys,
  },
  controller: () => autoUpdateFrom(args.controlPlane, 'test-token-0123456789'),
  installPath: args.installPath,
  currentVersion: args.currentVersion,
});
console.log(JSON.stringify(outcome));
