/**
 * Self-update (docs/agent.md, docs/release.md): every `checkInterval` minutes ask the controller whether auto-update is on
 * (its answer wins over the local file), list the releases of `releaseRepo`, pick the newest of the
 * channel above the running version, download it, check its SHA256 against the release's SHA256SUMS
 * (refuse on mismatch), run it with `--version`, swap it in atomically keeping the previous file, and
 * restart through the supervisor: the process exits with RESTART_EXIT_CODE and systemd
 * (`Restart=always`) or the DaemonSet starts the new file. Tunnels and BIRD keep running meanwhile.
 * The new version runs on probation until its first good pass (probation.ts); versions rolled back
 * there are skipped.
 */
import path from 'node:path';
import { VERSION } from '../../common/version.ts';
import { ARTIFACT_NAME, checkRuns, downloadArtifact, fetchExpectedSha256, swapInstall } from './install.ts';
import { endProbation, rejectedVersions, startProbation } from './probation.ts';
import { fetchReleases, releaseVersion, selectRelease, UpdateError, type UpdateChannel } from './releases.ts';
import { rm } from 'node:fs/promises';

/** Exit status that asks the supervisor for a restart into the new version (EX_TEMPFAIL). */
export const RESTART_EXIT_CODE = 75;

export interface UpdaterLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface UpdaterOptions {
  /** The local `autoUpdate` section of the agent config. */
  local: {
    enabled: boolean;
    checkInterval: number;
    channel: string;
    releaseRepo: string;
    /** SSH public key lines that sign releases (signature.ts); none: no update is ever installed. */
    publicKeys: readonly string[];
  };
  /** The controller's setting, asked before every check; a failure skips the check. */
  controller?: () => Promise<ControllerAutoUpdate>;
  /** The running release artifact; undefined when not running from one (nothing to swap). */
  installPath: string | undefined;
  currentVersion?: string;
  /** Called after a successful swap; by default exits with RESTART_EXIT_CODE. */
  restart?: (version: string) => void;
  log?: UpdaterLog;
  timeoutMs?: number;
}

/** The controller's word: `autoUpdate` of GET /agent/:router/config, asked afresh before every check. */
export interface ControllerAutoUpdate {
  enabled: boolean;
  channel: string;
}

export type UpdateOutcome =
  | { result: 'disabled'; by: 'controller' | 'local' | 'no-release-key' }
  | { result: 'not-installed' }
  | { result: 'up-to-date'; version: string }
  | { result: 'updated'; from: string; to: string };

const silent: UpdaterLog = { info: () => undefined, warn: () => undefined };

/** The running file when it is a release artifact (`…/peerops.mjs`), else undefined. */
export function runningArtifact(entry: string | undefined = process.argv[1]): string | undefined {
  return entry && path.basename(entry) === ARTIFACT_NAME ? path.resolve(entry) : undefined;
}

export async function checkForUpdate(opts: UpdaterOptions): Promise<UpdateOutcome> {
  const log = opts.log ?? silent;
  const current = opts.currentVersion ?? VERSION;
  const timeoutMs = opts.timeoutMs ?? 120_000;
  if (!opts.installPath) return { result: 'not-installed' };
  // Both switches must allow it: the controller turns updates off fleet-wide, the file opts one node out.
  if (!opts.local.enabled) return { result: 'disabled', by: 'local' };
  // unsigned code is never run: without a key to check releases with, there is nothing to install
  if (opts.local.publicKeys.length === 0) return { result: 'disabled', by: 'no-release-key' };
  let channel = opts.local.channel as UpdateChannel;
  if (opts.controller) {
    const central = await opts.controller();
    if (!central.enabled) return { result: 'disabled', by: 'controller' };
    channel = central.channel as UpdateChannel;
  }

  const rejected = await rejectedVersions(opts.installPath);
  const releases = (await fetchReleases(opts.local.releaseRepo, timeoutMs)).filter((r) => {
    const version = releaseVersion(r);
    if (version === undefined || !rejected.has(version)) return true;
    log.warn({ version }, 'release skipped: it was rolled back after it failed to run here');
    return false;
  });
  const pick = selectRelease(releases, channel, current);
  if (!pick) return { result: 'up-to-date', version: current };

  const expected = await fetchExpectedSha256(pick.release, opts.local.publicKeys, timeoutMs);
  const { file, sha256 } = await downloadArtifact(pick.release, opts.installPath, timeoutMs);
  try {
    if (sha256 !== expected) {
      throw new UpdateError(
        `${ARTIFACT_NAME} of ${pick.release.tag_name} has SHA256 ${sha256}, SHA256SUMS says ${expected}: refused`,
      );
    }
    await checkRuns(file, pick.version);
    // Probation before the swap: the new file never runs outside it.
    await startProbation(opts.installPath, pick.version);
    try {
      await swapInstall(opts.installPath, file);
    } catch (err) {
      await endProbation(opts.installPath);
      throw err;
    }
  } catch (err) {
    await rm(file, { force: true });
    throw err;
  }
  log.info({ from: current, to: pick.version, channel }, 'agent updated; restarting into the new version');
  (opts.restart ?? defaultRestart)(pick.version);
  return { result: 'updated', from: current, to: pick.version };
}

function defaultRestart(): void {
  process.exit(RESTART_EXIT_CODE);
}

/** Checks now and every `checkInterval` minutes; failures are logged and retried at the next tick. */
export function startUpdater(opts: UpdaterOptions): { stop(): void } {
  const log = opts.log ?? silent;
  if (!opts.installPath) {
    log.info({}, 'not running from a release artifact: auto-update is off');
    return { stop: () => undefined };
  }
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const outcome = await checkForUpdate(opts);
      if (outcome.result !== 'up-to-date' && outcome.result !== 'updated')
        log.info(outcome, 'auto-update check');
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'auto-update check failed');
    } finally {
      running = false;
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), opts.local.checkInterval * 60_000);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
