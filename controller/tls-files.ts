/**
 * The admission webhook's certificate and key from a directory, as a `kubernetes.io/tls` Secret mounts
 * (`tls.crt`, `tls.key`). The kubelet rewrites a mounted Secret in place when it changes (a replaced
 * Secret, cert-manager's renewals), so the pair is read again periodically and a changed one is served
 * from the next TLS handshake on, without a restart.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';

export interface TlsPair {
  cert: Buffer;
  key: Buffer;
}

export async function readTlsDir(dir: string): Promise<TlsPair> {
  // one after the other: a missing directory is always reported as its tls.crt
  const cert = await readFile(join(dir, 'tls.crt'));
  return { cert, key: await readFile(join(dir, 'tls.key')) };
}

/**
 * `everyMs` after the last check ended, reads the pair again and hands it to `apply` when it differs from
 * the last one. A pair that cannot be read or applied (caught mid-update, a key that does not match the
 * certificate) is logged and tried again next time; the old one stays in service. Checks never overlap:
 * two at once could each log the same bad pair. Returns the stop function.
 */
export function watchTlsDir(
  dir: string,
  current: TlsPair,
  apply: (pair: TlsPair) => void,
  log: Pick<Logger, 'info' | 'warn'>,
  everyMs = 30_000,
): () => void {
  let served = current;
  let failed = false;
  const check = async () => {
    try {
      const next = await readTlsDir(dir);
      if (next.cert.equals(served.cert) && next.key.equals(served.key)) return;
      apply(next);
      served = next;
      failed = false;
      log.info({ dir }, 'webhook certificate reloaded');
    } catch (err) {
      // once per bad state, not every interval
      if (!failed) log.warn({ dir, err: (err as Error).message }, 'webhook certificate not reloaded');
      failed = true;
    }
  };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const next = () => {
    if (stopped) return;
    timer = setTimeout(() => void check().finally(next), everyMs);
    timer.unref();
  };
  next();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
