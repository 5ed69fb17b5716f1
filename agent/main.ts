/**
 * `peerops agent --config PATH`: loads and checks the config (refusing to start on a bad file, exit 1),
 * checks the router (system/preflight.ts: exit 78 on an unmet need), creates BIRD's include dirs, bootstraps from the controller in bootstrap mode, detects the WireGuard backend, starts the sync,
 * heartbeat and metric loops and the local server. SIGTERM/SIGINT: stop the loops, close the server, and
 * exit after a grace of 5 s even if a pass is still under way.
 */
import { parseArgs } from 'node:util';
import pino from 'pino';
import { usageError } from '../common/usage.ts';
import { AgentConfigError, loadConfig, mergeBootstrap } from './config.ts';
import { forwardingOff } from './system/forwarding.ts';
import { PREFLIGHT_EXIT, preflight } from './system/preflight.ts';
import { Agent, UNAUTHORIZED_EXIT } from './agent.ts';
import { startBirdLgProxy } from './looking-glass/bird-lg-proxy.ts';
import { startServer } from './server.ts';
import { ControlPlaneClient, ControlPlaneError } from './sync/client.ts';
import { endProbation } from './update/probation.ts';
import { runningArtifact, startUpdater } from './update/updater.ts';
import { detectBackend } from './wireguard/interface.ts';
import { syncPublicKeyFile } from './wireguard/public-key.ts';

const USAGE = `usage: peerops agent --config PATH

  --config   the agent's JSON config file (default /etc/peerops/agent.json)`;

export async function main(argv: string[]): Promise<number> {
  let flags: { config?: string | undefined; help?: boolean | undefined };
  try {
    flags = parseArgs({
      args: argv,
      options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    }).values;
  } catch (err) {
    return usageError(`${(err as Error).message}\n\n${USAGE}`);
  }
  if (flags.help) {
    console.log(USAGE);
    return 0;
  }
  const log = pino({
    name: 'peerops-agent',
    redact: ['token', 'authorization', '*.token', 'controlPlane.token'],
  });
  let config;
  try {
    config = await loadConfig(flags.config ?? '/etc/peerops/agent.json');
  } catch (err) {
    if (err instanceof AgentConfigError) {
      console.error(`peerops agent: bad config ${err.file}:`);
      for (const e of err.errors) console.error(`  ${e.pointer}: ${e.message}`);
      return 1;
    }
    throw err;
  }
  // Before the controller is asked anything: a router that lacks a program, a capability or access to
  // BIRD gets one line per problem naming the fix, not a stack trace minutes later (docs/agent.md).
  const checked = await preflight(config);
  if (checked.errors.length) {
    for (const line of checked.errors) console.error(`peerops agent: ${line}`);
    for (const line of checked.warnings) console.error(`peerops agent: warning: ${line}`);
    return PREFLIGHT_EXIT;
  }
  for (const line of checked.warnings) log.warn(line);
  if (checked.created.length) log.info({ dirs: checked.created }, 'created BIRD include directories');
  const client = new ControlPlaneClient({ ...config.controlPlane, router: config.node.name });
  const stopping = new AbortController();
  const onSignal = () => stopping.abort();
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);

  if (config.mode === 'bootstrap') {
    for (let attempt = 0; ; attempt++) {
      try {
        config = mergeBootstrap(config, await client.bootstrap());
        log.info({ node: config.node.name, id: config.node.id }, 'bootstrapped from the controller');
        break;
      } catch (err) {
        if (err instanceof ControlPlaneError && err.unauthorized) {
          log.error(
            { err: err.message, exitCode: UNAUTHORIZED_EXIT },
            'the controller refused the agent token (401): check controlPlane.token against the router (admin router rotate-token); stopping',
          );
          return UNAUTHORIZED_EXIT;
        }
        const delay = client.failureDelay(attempt);
        log.warn({ err: (err as Error).message, retryInMs: delay }, 'bootstrap failed');
        await new Promise((r) => setTimeout(r, delay));
        if (stopping.signal.aborted) return 0;
      }
    }
  }
  const backend = await detectBackend();
  if (backend === 'none')
    log.warn(
      'no WireGuard: the kernel has none and wireguard-go is not on PATH; every session setup fails until one is installed',
    );
  else log.info({ backend }, 'WireGuard backend');
  await reportPublicKey(config.tunnel, log);
  const off = await forwardingOff();
  if (off.length)
    log.warn(
      { off },
      `IP forwarding is off: transit traffic is dropped; set ${off.map((k) => `${k}=1`).join(' ')}`,
    );
  // the mesh answer comes from the controller, as the sessions do
  const agent = new Agent(config, log, client, client);
  const server = await startServer(config, agent);
  const proxyOptions = config.lookingGlass.birdLgProxy;
  const birdLgProxy = proxyOptions
    ? await startBirdLgProxy(proxyOptions, agent.bird, log.child({ part: 'bird-lg-go' }))
    : undefined;
  log.info({ listen: config.server.listen, mode: config.mode }, 'agent started');
  agent.start();
  const installPath = runningArtifact();
  if (installPath)
    void agent.firstPass
      .then(() => endProbation(installPath))
      .then((version) => version && log.info({ version }, 'self-update confirmed by a good pass'))
      .catch((err: Error) => log.warn({ err: err.message }, 'could not end the self-update probation'));
  const updater = startUpdater({
    local: config.autoUpdate,
    controller: async () => (await client.bootstrap()).autoUpdate,
    installPath,
    log: log.child({ part: 'update' }),
  });
  const code = await Promise.race([
    new Promise<number>((resolve) =>
      stopping.signal.addEventListener('abort', () => resolve(0), { once: true }),
    ),
    agent.fatal,
  ]);
  log.info('stopping');
  updater.stop();
  server.close();
  server.closeAllConnections();
  birdLgProxy?.close();
  birdLgProxy?.closeAllConnections();
  if (await agent.close())
    // What was left behind would keep the process running past the grace; main returns first (its
    // callers set the exit status), then the process ends whatever is still pending (docs/agent.md).
    setTimeout(() => process.exit(code), 100).unref();
  return code;
}

/** The session tunnels' public key, in the log and in tunnel.publicKeyPath (public keys are no secret). */
async function reportPublicKey(
  tunnel: { privateKeyPath: string; publicKeyPath: string },
  log: pino.Logger,
): Promise<void> {
  try {
    const file = await syncPublicKeyFile(tunnel.privateKeyPath, tunnel.publicKeyPath);
    if (file.state === 'mismatch')
      log.error(
        { publicKey: file.publicKey, inFile: file.inFile, path: tunnel.publicKeyPath },
        "the public key file names another key than the private key's; peers must use publicKey, and the router's publicKey at the controller must be it",
      );
    else log.info({ publicKey: file.publicKey, path: tunnel.publicKeyPath, state: file.state }, 'tunnel key');
  } catch (err) {
    // a private key that cannot be used fails every session setup too, with the same words
    log.error({ err: (err as Error).message }, 'tunnel key not checked');
  }
}
