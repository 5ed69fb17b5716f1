/**
 * `peerops serve [--listen HOST:PORT] [--data DIR]`: opens the store, builds the app, starts the
 * reconciler and listens. SIGTERM/SIGINT: stop accepting, release long polls, let in-flight requests
 * finish, stop the reconciler, close the store (which finishes queued writes).
 */
import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { FastifyInstance } from 'fastify';
import { usageError } from '../common/usage.ts';
import { announcesNoPrefix, NO_OWN_PREFIX_WARNING } from '../common/rules/policy.ts';
import { loadConfig, type Config } from './config.ts';
import { controllerLogger } from './logger.ts';
import { TokenIssuer, defaultKeyPath } from './auth/jwt.ts';
import { openStore } from './store/open.ts';
import { fixHeapGrowth } from './heap.ts';
import { LISTEN_BACKLOG, autoApprovalAllowed, buildAdmissionApp, buildApp } from './app.ts';
import { readTlsDir, watchTlsDir } from './tls-files.ts';
import { SessionReconciler } from './reconcile/session-reconciler.ts';
import { Notifier, notifierEnv } from './notify/notifier.ts';
import { FileWebhooks } from './notify/webhooks.ts';
import { openRegistry } from './auth/login/registry.ts';
import { redactUrls } from '../common/redact.ts';

const USAGE = `usage: peerops serve [--listen HOST:PORT] [--trust-proxy LIST] [--data DIR] [--git-remote URL]
                     [--git-branch NAME] [--git-push-mode sync|async] [--git-push-timeout SECONDS]
                     [--history-prometheus URL]

  --listen      address to listen on (env PEEROPS_LISTEN, default 127.0.0.1:8080; every address: [::]:8080)
  --trust-proxy the reverse proxies whose X-Forwarded-For names the client: addresses and CIDRs, comma-
                separated (127.0.0.1,::1), or true for any (env PEEROPS_TRUST_PROXY, default false)
  --data        data directory: git store and JWT key (env PEEROPS_DATA, default ./data)
  --git-remote  follow this repository on a forge and push back to it (env PEEROPS_GIT_REMOTE;
                credentials: PEEROPS_GIT_CREDENTIALS_FILE; docs/gitops.md)
  --git-branch  the branch of the spec files (env PEEROPS_GIT_BRANCH, default main)
  --git-push-mode     sync (default): a write is answered once the forge holds it, 503 FORGE_UNAVAILABLE
                      when it cannot be reached in time; async: once committed locally, pushed soon after
                      (env PEEROPS_GIT_PUSH_MODE; docs/gitops.md)
  --git-push-timeout  seconds a synchronous write waits for the forge (env PEEROPS_GIT_PUSH_TIMEOUT, 1 to
                      60, default 5)
  --history-prometheus  read session history from this Prometheus, which scrapes every replica (env
                      PEEROPS_HISTORY_PROMETHEUS; docs/kubernetes.md, Session history)

env: PEEROPS_STORE (git|kubernetes), PEEROPS_JWT_KEY_FILE, PEEROPS_REDIS_URL, AGENT_AUTOUPDATE,
     PEEROPS_REGISTRY, PEEROPS_ADMIN_ASNS, PEEROPS_SERVICE_HOST, PEEROPS_TOKEN_TTL,
     PEEROPS_PORTAL_IDLE_TIMEOUT (the portal's sign-in, seconds unused; docs/login.md), PEEROPS_LOG_LEVEL,
     PEEROPS_WEBHOOK_LISTEN with PEEROPS_WEBHOOK_CERT_DIR (Kubernetes store: the admission webhook),
     PEEROPS_GIT_INTERVAL, PEEROPS_GIT_CREDENTIALS(_FILE), PEEROPS_GIT_WEBHOOK_SECRET(_FILE),
     PEEROPS_NOTIFY_ALLOW_PRIVATE (peers' webhooks to private addresses; docs/notifications.md)`;

/** `:PORT` means every address: IPv6 and IPv4 where the host has IPv6, else IPv4 only. */
async function listen(app: FastifyInstance, where: { host: string; port: number }): Promise<string> {
  const backlog = LISTEN_BACKLOG;
  if (where.host) return app.listen({ ...where, backlog });
  try {
    return await app.listen({ host: '::', port: where.port, backlog });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL') throw err;
    return app.listen({ host: '0.0.0.0', port: where.port, backlog });
  }
}

export async function main(argv: string[]): Promise<number> {
  let flags: {
    listen?: string | undefined;
    'trust-proxy'?: string | undefined;
    data?: string | undefined;
    'git-remote'?: string | undefined;
    'git-branch'?: string | undefined;
    'git-push-mode'?: string | undefined;
    'git-push-timeout'?: string | undefined;
    'history-prometheus'?: string | undefined;
    help?: boolean | undefined;
  };
  try {
    flags = parseArgs({
      args: argv,
      options: {
        listen: { type: 'string' },
        'trust-proxy': { type: 'string' },
        data: { type: 'string' },
        'git-remote': { type: 'string' },
        'git-branch': { type: 'string' },
        'git-push-mode': { type: 'string' },
        'git-push-timeout': { type: 'string' },
        'history-prometheus': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }).values;
  } catch (err) {
    return usageError(`${(err as Error).message}\n\n${USAGE}`);
  }
  if (flags.help) {
    console.log(USAGE);
    return 0;
  }
  let config;
  try {
    config = loadConfig({
      listen: flags.listen,
      trustProxy: flags['trust-proxy'],
      data: flags.data,
      gitRemote: flags['git-remote'],
      gitBranch: flags['git-branch'],
      gitPushMode: flags['git-push-mode'],
      gitPushTimeout: flags['git-push-timeout'],
      historyPrometheus: flags['history-prometheus'],
    });
  } catch (err) {
    return usageError(redactUrls((err as Error).message));
  }
  const logger = controllerLogger(config.logLevel);
  // Everything that can fail at start (data dir, key, store, registry, the listen address) ends in one
  // line naming the cause and exit status 1, with what was already opened closed again. A shutdown
  // closes the same things, newest first: the API, the reconciler, the registry, the store.
  const opened: (() => Promise<unknown>)[] = [];
  // The signal handlers come first: a SIGTERM while the store is still loading waits for the start to
  // finish and then shuts down like any other, instead of killing the process halfway.
  const signalled = new Promise<string>((resolve) => {
    const onTerm = () => stop('SIGTERM');
    const onInt = () => stop('SIGINT');
    const stop = (signal: string) => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
      resolve(signal);
    };
    process.once('SIGTERM', onTerm);
    process.once('SIGINT', onInt);
  });
  try {
    await start(config, logger, opened);
  } catch (err) {
    for (const close of opened.reverse()) await close().catch(() => undefined);
    // a library's error may quote a URL it was given (a registry, a forge) with its credentials
    console.error(`peerops serve: ${redactUrls(startupFailure(err, config))}`);
    return 1;
  }
  logger.info({ signal: await signalled }, 'shutting down');
  // Every part is closed even when one before it fails: a failing API close must not leave the store's
  // queued writes unfinished.
  let failed = false;
  for (const close of opened.reverse())
    await close().catch((err: unknown) => {
      failed = true;
      logger.error({ err }, 'shutdown step failed');
    });
  logger.info(failed ? 'stopped, with errors' : 'stopped');
  return failed ? 1 : 0;
}

/** Opens everything `peerops serve` runs on and listens; `opened` collects how to close each, in order. */
async function start(
  config: Config,
  logger: ReturnType<typeof controllerLogger>,
  opened: (() => Promise<unknown>)[],
) {
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  // A key file named explicitly (a mounted Secret, shared by replicas) must exist; the data dir's
  // default key is created on first start.
  const tokens = config.jwtKeyFile
    ? await TokenIssuer.fromExistingFile(config.jwtKeyFile)
    : await TokenIssuer.fromFile(defaultKeyPath(config.dataDir));
  // the git store installs its pre-receive hook once it holds the repository (docs/gitops.md)
  const store = await openStore(config, logger, true);
  await store.start();
  opened.push(() => store.close());
  // loaded: from here on the heap grows as a running controller's should (heap.ts)
  fixHeapGrowth();
  const registry = config.registry
    ? await openRegistry({
        source: config.registry,
        cacheDir: join(config.dataDir, 'registry.git'),
        log: logger,
      })
    : undefined;
  if (registry) {
    opened.push(() => registry.close());
    if (config.serviceHost === undefined)
      logger.warn(
        { serviceHost: hostname() },
        'PEEROPS_SERVICE_HOST is not set: login challenges name this machine; `peerops login` refuses them when it reaches the service by another name',
      );
  } else logger.warn('PEEROPS_REGISTRY is not set: /login is off; mint tokens with `peerops admin token`');
  if (announcesNoPrefix(store.getPolicy('default')?.spec)) logger.warn(NO_OWN_PREFIX_WARNING);
  const reviewedAnyway = autoApprovalAllowed(registry, config)
    ? []
    : store.listRouters().filter((r) => r.spec.autoApprove);
  if (reviewedAnyway.length > 0)
    logger.warn(
      { routers: reviewedAnyway.map((r) => r.name) },
      "autoApprove is set but has no effect: no DN42 registry's route objects check a session's addresses, so new sessions wait for review (PEEROPS_AUTO_APPROVE_WITHOUT_REGISTRY=true approves them anyway)",
    );
  // Webhooks beside the store: a Secret shared by the replicas, or a file in the data dir (notify/webhooks.ts).
  const notifier = new Notifier({
    store,
    webhooks:
      store.backend === 'kubernetes'
        ? (await import('./notify/kubernetes.ts')).kubernetesWebhooks()
        : new FileWebhooks(config.dataDir),
    logger,
    ...notifierEnv(),
  });
  // Kubernetes store: the replicas share looking-glass queries, so any of them reaches any agent
  const lookingGlass =
    store.backend === 'kubernetes'
      ? await (await import('./looking-glass/kubernetes-broker.ts')).startKubernetesBroker(logger)
      : undefined;
  const app = await buildApp({
    store,
    tokens,
    config,
    logger,
    notifier,
    ...(lookingGlass ? { lookingGlass } : {}),
    ...(registry
      ? { login: { registry, serviceHost: config.serviceHost ?? hostname(), admins: config.adminAsns } }
      : {}),
  });
  const reconciler = new SessionReconciler({
    store,
    logger,
    stuckAfterSeconds: config.stuckAfterSeconds,
    offlineAfterSeconds: config.offlineAfterSeconds,
    onFindingRaised: (c) => void notifier.findingRaised(c),
    registry,
  });
  // What only the leader does: reconcile, and send the events read from the store's state.
  const leaderWork = {
    start: () => {
      reconciler.start();
      notifier.start();
    },
    stop: async () => {
      await notifier.stop();
      await reconciler.stop();
    },
  };
  // Kubernetes store: every replica serves the API, only the holder of the Lease reconciles
  const elector =
    store.backend === 'kubernetes'
      ? (await import('./store/kubernetes/index.ts')).electReconciler(leaderWork, { logger })
      : undefined;
  if (!elector) leaderWork.start();
  opened.push(async () => {
    await elector?.stop();
    await leaderWork.stop();
  });
  opened.push(() => app.close());
  const address = await listen(app, config.listen);
  logger.info({ address, store: store.backend, data: config.dataDir }, 'peerops controller listening');
  if (config.webhook) {
    const { certDir } = config.webhook;
    const tls = await readTlsDir(certDir);
    const webhook = await buildAdmissionApp({ store, logger, tls });
    const stopWatching = watchTlsDir(certDir, tls, (pair) => webhook.server.setSecureContext(pair), logger);
    opened.push(async () => {
      stopWatching();
      await webhook.close();
    });
    const at = await listen(webhook, config.webhook.listen);
    logger.info({ address: at }, 'admission webhook listening');
  }
  // the log is written in batches (controller/logger.ts): the start-up lines go out now, not up to
  // 100 ms after the first request is answered
  logger.flush();
}

/** One line for a failed start: the reason in the operator's terms where Node's words are cryptic. */
function startupFailure(err: unknown, config: Config): string {
  const e = err as NodeJS.ErrnoException & { path?: string; port?: number };
  // the API's address, or the webhook's when that is the port that failed
  const where =
    config.webhook && e.port === config.webhook.listen.port && e.port !== config.listen.port
      ? config.webhook.listen
      : config.listen;
  if (e.code === 'EADDRINUSE')
    return `cannot listen on ${where.host || '*'}:${where.port}: the address is in use`;
  if (e.code === 'EADDRNOTAVAIL') return `cannot listen on ${where.host}: no such address on this machine`;
  if ((e.code === 'EEXIST' || e.code === 'ENOTDIR') && e.path?.startsWith(config.dataDir))
    return `data dir ${config.dataDir} is not a directory`;
  // `ENOENT: no such file or directory, stat '/x'` → `/x: no such file or directory`
  if (e.code && e.path) return `${e.path}: ${e.message.replace(/^[A-Z]+: /, '').replace(/, \w+ '.*'$/, '')}`;
  return e.message ?? String(err);
}
