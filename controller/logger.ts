/**
 * The controller's logger: pino JSON lines at PEEROPS_LOG_LEVEL, with tokens redacted wherever a log
 * object might carry one. `peerops serve` writes to stdout; the benchmark to /dev/null.
 */
import pino, { type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config.ts';

/**
 * Where the lines go (a file descriptor or path; stdout by default), written asynchronously as pino's
 * default is, but gathered: up to 4 KiB, or for at most 100 ms, and at exit (pino flushes its
 * destinations then). One write per line, one request's line each, cost more of a request's CPU than
 * the rest of its logging (docs/benchmarks.md, user-list); a line still reaches the log within 100 ms.
 */
export function logDestination(dest: number | string = 1): DestinationStream {
  return pino.destination({ dest, sync: false, minLength: 4096, periodicFlush: 100 });
}

export function controllerLogger(level: LogLevel, destination: DestinationStream = logDestination()): Logger {
  return pino(
    {
      name: 'peerops',
      level,
      // the portal's sign-in cookie carries its token (docs/login.md)
      redact: ['req.headers.authorization', 'req.headers.cookie', '*.token', '*.agentToken'],
    },
    destination,
  );
}
