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
import { loadConfig } from './config.ts';
import { controllerLogger } from './logger.ts';
import { TokenIssuer, defaultKeyPath } from './auth/jwt.ts';
import { openStore } from './store/open.ts';
import { buildApp } from './app.ts';
import { Reconciler } from './reconcile/index.ts';
import { openRegistry, type Registry } from './auth/login/registry.ts';

const USAGE = `usage: peerops serve [--listen HOST:PORT] [--data DIR]

  --listen   address to listen on (env PEEROPS_LISTEN, default :8080)
  --data     data directory: git store and JWT key (env PEEROPS_DATA, default ./data)

env: PEEROPS_STORE (git|kubernetes), PEEROPS_JWT_KEY_FILE, PEEROPS_REDIS_URL, AGENT_AUTOUPDATE,
     PEEROPS_REGISTRY, PEEROPS_ADMIN_ASNS, PEEROPS_SERVICE_HOST`;

/** `:PORT` means every address: IPv6 and IPv4 where the host has IPv6, else IPv4 only. */
async function listen(app: FastifyInstance, where: { host: string; port: number }): Promise<string> {
  if (where.host) return app.listen(where);
  try {
    return await app.listen({ host: '::', port: where.port });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL') throw err;
    return app.listen({ host: '0.0.0.0', port: where.port });
  }
}

export async function main(argv: string[]): Promise<number> {
  let flags: { listen?: string | undefined; data?: string | undefined; help?: boolean | undefined };
  try {
    flags = parseArgs({
      args: argv,
      options: {
        listen: { type: 'string' },
        data: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }).values;
  } catch (err) {
    console.error(`peerops serve: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (flags.help) {
    console.log(USAGE);
    return 0;
  }
  let config;
  try {
    config = loadConfig(flags);
  } catch (err) {
    console.error(`peerops serve: ${(err as Error).message}`);
    return 2;
  }
  const logger = controllerLogger(config.logLevel);
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const tokens = await TokenIssuer.fromFile(config.jwtKeyFile ?? defaultKeyPath(config.dataDir));
  const store = await openStore(config, logger);
  await store.start();
  let registry: Registry | undefined;
  if (config.registry) {
    registry = await openRegistry({
      source: config.registry,
      cacheDir: join(config.dataDir, 'registry.git'),
      log: logger,
    });
  } else logger.warn('PEEROPS_REGISTRY is not set: /login is off; mint tokens with `peerops admin token`');
  const app = await buildApp({
    store,
    tokens,
    config,
    logger,
    ...(registry
      ? { login: { registry, serviceHost: config.serviceHost ?? hostname(), admins: config.adminAsns } }
      : {}),
  });
  const reconciler = new Reconciler({
    store,
    logger,
    stuckAfterSeconds: config.stuckAfterSeconds,
    offlineAfterSeconds: config.offlineAfterSeconds,
  });
  // Kubernetes store: every replica serves the API, only the holder of the Lease reconciles
  const elector =
    store.backend === 'kubernetes'
      ? (await import('./store/kubernetes/index.ts')).electReconciler(reconciler, { logger })
      : undefined;
  if (!elector) reconciler.start();
  const address = await listen(app, config.listen);
  logger.info({ address, store: store.backend, data: config.dataDir }, 'peerops controller listening');

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'shutting down');
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
      resolve();
    };
    const onTerm = () => stop('SIGTERM');
    const onInt = () => stop('SIGINT');
    process.once('SIGTERM', onTerm);
    process.once('SIGINT', onInt);
  });
  await app.close();
  await elector?.stop();
  await reconciler.stop();
  await store.close();
  await registry?.close();
  logger.info('stopped');
  return 0;
}
