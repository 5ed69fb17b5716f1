/**
 * How every `peerops` command says a usage error (bad or missing arguments): `USAGE: message` on stderr
 * and exit status 2; any other failure exits with 1.
 */
const USAGE_EXIT = 2;

/** Says the usage error; answers the exit status. */
export function usageError(message: string): number {
  console.error(`USAGE: ${message}`);
  return USAGE_EXIT;
}
