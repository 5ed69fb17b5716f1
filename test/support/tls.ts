/** Certificates for tests, made by the real openssl. */
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A fresh CA and a certificate for 127.0.0.1 signed by it, written to `dir` as a kubernetes.io/tls Secret
 * mounts them (`tls.crt`, `tls.key`) plus `ca.crt`; returns the CA certificate (PEM).
 */
export async function makeCertificate(dir: string): Promise<Buffer> {
  const openssl = (...args: string[]) => run('openssl', args, { cwd: dir });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '1',
    '-subj',
    '/CN=test-ca',
  );
  await openssl('req', ...ec, '-keyout', 'tls.key', '-out', 'tls.csr', '-subj', '/CN=127.0.0.1');
  await writeFile(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  await openssl(
    'x509',
    '-req',
    '-in',
    'tls.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'tls.crt',
    '-days',
    '1',
    '-extfile',
    'san.ext',
  );
  return readFile(join(dir, 'ca.crt'));
}
