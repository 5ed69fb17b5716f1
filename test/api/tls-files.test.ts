/**
 * The admission webhook's HTTPS server takes a renewed certificate from its directory without a restart
 * (real openssl certificates, a real TLS handshake on loopback), and keeps serving the old one while the
 * directory holds a pair that does not fit together.
 */
import { X509Certificate } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAdmissionApp } from '../../controller/app.ts';
import { readTlsDir, watchTlsDir } from '../../controller/tls-files.ts';
import { makeCertificate } from '../support/tls.ts';
import { startHarness, type Harness } from './helpers.ts';

let h: Harness;
let dir: string;

beforeAll(async () => {
  h = await startHarness();
  dir = await mkdtemp(join(tmpdir(), 'peerops-tls-'));
});
afterAll(async () => {
  await h.close();
  await rm(dir, { recursive: true, force: true });
});

/** The fingerprint of the certificate the server presents in a handshake. */
function servedFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerX509Certificate()?.fingerprint256 ?? '');
      socket.end();
    });
    socket.on('error', reject);
  });
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} within 5 s`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('the webhook certificate', () => {
  it('is reloaded when its files change, and a pair that does not fit is not taken', async () => {
    const [first, second, served] = [join(dir, 'first'), join(dir, 'second'), join(dir, 'served')];
    for (const d of [first, second, served]) await mkdir(d);
    await makeCertificate(first);
    await makeCertificate(second);
    const put = async (certFrom: string, keyFrom: string) => {
      await copyFile(join(certFrom, 'tls.crt'), join(served, 'tls.crt'));
      await copyFile(join(keyFrom, 'tls.key'), join(served, 'tls.key'));
    };
    await put(first, first);
    const fingerprint = async (d: string) => new X509Certificate((await readTlsDir(d)).cert).fingerprint256;
    const tls = await readTlsDir(served);
    const webhook = await buildAdmissionApp({ store: h.store, logger: pino({ level: 'silent' }), tls });
    const lines: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const warnings = () =>
      lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level === 40);
    const stop = watchTlsDir(served, tls, (pair) => webhook.server.setSecureContext(pair), log, 20);
    try {
      await webhook.listen({ host: '127.0.0.1', port: 0 });
      const port = (webhook.server.address() as { port: number }).port;
      expect(await servedFingerprint(port)).toBe(await fingerprint(first));

      await put(second, second);
      await until(
        async () => (await servedFingerprint(port)) === (await fingerprint(second)),
        'the new certificate',
      );

      // the first certificate with the second's key: refused, the second stays in service
      await copyFile(join(first, 'tls.crt'), join(served, 'tls.crt'));
      await until(async () => warnings().length > 0, 'a warning');
      await new Promise((r) => setTimeout(r, 100)); // several more checks: still one warning
      expect(warnings().map((l) => l.msg)).toEqual(['webhook certificate not reloaded']);
      expect(await servedFingerprint(port)).toBe(await fingerprint(second));
    } finally {
      stop();
      await webhook.close();
    }
  });
});
