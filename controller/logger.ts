/**
 * The controller's logger: pino JSON lines at PEEROPS_LOG_LEVEL, with tokens redacted wherever a log
 * object might carry one. `peerops serve` writes to stdout; the benchmark to /dev/null.
 */
import pino, { type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config.ts';

export function controllerLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const options = {
    name: 'peerops',
    level,
    redact: ['req.headers.authorization', '*.token', '*.agentToken'],
  };
  return destination ? pino(options, destination) : pino(options);
}
