/**
 * A hostile release mirror (docs/agent.md, the mirror caps): an HTTP server on 127.0.0.1 that answers
 * the release listing, SHA256SUMS, its signature and the artifact with endless or 400 MB bodies, and one that
 * declares a Content-Length over the cap. The updater refuses each with an error naming the file and its
 * cap, stops reading at the cap (the server counts what it could send), and its RSS grows by less than
 * 32 MiB for the small files (the artifact streams to disk).
 */
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIRROR_CAPS, readCapped } from '../../agent/update/capped.ts';
import {
  ARTIFACT_NAME,
  CHECKSUMS_NAME,
  downloadArtifact,
  fetchExpectedSha256,
} from '../../agent/update/install.ts';
import type { Release } from '../../agent/update/releases.ts';
import { SIGNATURE_NAME } from '../../agent/update/signature.ts';
import { checkForUpdate } from '../../agent/update/updater.ts';

const MiB = 1024 * 1024;
let mirror: ChildProcess;
let base: string;
let root: string;

/**
 * The mirror, in a process of its own so that the RSS measured is the updater's alone. It writes 64 KiB
 * chunks until the body's size (400 MB under /400mb/, else without end) or until the client goes away,
 * waiting for the socket to drain; GET /sent?<path> answers how many bytes it handed to the socket.
 */
const MIRROR = `
const http = require('node:http');
const CHUNK = Buffer.alloc(64 * 1024, 0x20);
const sent = new Map();
const server = http.createServer((req, res) => {
  const url = req.url;
  if (url.startsWith('/sent?')) return res.end(String(sent.get(url.slice(6)) ?? 0));
  if (url === '/sig/${CHECKSUMS_NAME}') return res.end('0'.repeat(64) + '  ${ARTIFACT_NAME}\\n');
  // /declared/ says 1 GiB up front: refused on the header, before the body is read
  res.writeHead(200, url.startsWith('/declared/') ? { 'content-length': String(2 ** 30) } : {});
  const total = url.startsWith('/400mb/') ? 400e6 : Infinity;
  let written = 0;
  let closed = false;
  res.on('close', () => (closed = true));
  const more = () => {
    while (!closed && written < total) {
      written += CHUNK.length;
      sent.set(url, written);
      if (!res.write(CHUNK)) return void res.once('drain', more);
    }
    if (!closed) res.end();
  };
  more();
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

/** Bytes the mirror handed to the socket for `path`. */
async function sent(path: string): Promise<number> {
  return Number(await (await fetch(`${base}/sent?${path}`)).text());
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'peerops-update-caps-'));
  mirror = spawn(process.execPath, ['-e', MIRROR], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(mirror.stdout!, 'data')) as [Buffer];
  base = `http://127.0.0.1:${line.toString().trim()}`;
  // Node loads its fetch (undici) on the first call: loaded here, it is not counted as the updater's growth
  await readCapped({ url: `${base}/sig/${CHECKSUMS_NAME}`, what: 'warm-up', cap: 1024, timeoutMs: 10_000 });
});

afterAll(async () => {
  mirror?.kill();
  if (root) await rm(root, { recursive: true, force: true });
});

function release(dir: string): Release {
  return {
    tag_name: 'v9.9.9',
    prerelease: false,
    draft: false,
    assets: [ARTIFACT_NAME, CHECKSUMS_NAME, SIGNATURE_NAME].map((name) => ({
      name,
      browser_download_url: `${base}/${dir}/${name}`,
    })),
  };
}

/** Runs `work` and answers its error with the largest RSS growth seen meanwhile (sampled every 5 ms). */
async function peakGrowth(work: () => Promise<unknown>): Promise<{ err: Error; growth: number }> {
  const start = process.memoryUsage.rss();
  let peak = start;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
  try {
    await work();
    throw new Error('the hostile answer was accepted');
  } catch (err) {
    return { err: err as Error, growth: Math.max(peak, process.memoryUsage.rss()) - start };
  } finally {
    clearInterval(sampler);
  }
}

const KEY = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb0d0PVtO8qU1JpHVW3kC3cXiVd7BVQfAFZKbBXvSYy test';

describe('a release mirror answering without end', () => {
  it('an endless release listing: refused at its cap, the updater check fails with that reason', async () => {
    const installPath = path.join(root, 'listing', ARTIFACT_NAME);
    const { err, growth } = await peakGrowth(() =>
      checkForUpdate({
        local: {
          enabled: true,
          checkInterval: 60,
          channel: 'stable',
          releaseRepo: `${base}/endless/owner/repo`,
          publicKeys: [KEY],
        },
        installPath,
        currentVersion: '0.1.0',
        timeoutMs: 60_000,
      }),
    );
    expect(err.message).toBe(
      `release listing ${base}/endless/repos/owner/repo/releases is larger than its cap of ${MIRROR_CAPS.listing} bytes: refused`,
    );
    expect(await sent('/endless/repos/owner/repo/releases')).toBeLessThan(MIRROR_CAPS.listing + 8 * MiB);
    // the 4 MiB it may hold, and the garbage of reading them that the collector has not returned yet
    expect(growth).toBeLessThan(MIRROR_CAPS.listing + 40 * MiB);
  });

  it('an endless SHA256SUMS and a 400 MB one: refused at 64 KiB, memory flat', async () => {
    for (const dir of ['endless', '400mb']) {
      const { err, growth } = await peakGrowth(() => fetchExpectedSha256(release(dir), [KEY], 60_000));
      expect(err.message).toBe(
        `${CHECKSUMS_NAME} of v9.9.9 is larger than its cap of ${MIRROR_CAPS.checksums} bytes: refused`,
      );
      // the socket buffers hold a few MB the client never read; 400 MB were offered
      expect(await sent(`/${dir}/${CHECKSUMS_NAME}`)).toBeLessThan(8 * MiB);
      expect(growth).toBeLessThan(32 * MiB);
    }
  });

  it('an endless signature: refused at its own cap', async () => {
    const { err, growth } = await peakGrowth(() => fetchExpectedSha256(release('sig'), [KEY], 60_000));
    expect(err.message).toBe(
      `${SIGNATURE_NAME} of v9.9.9 is larger than its cap of ${MIRROR_CAPS.signature} bytes: refused`,
    );
    expect(await sent(`/sig/${SIGNATURE_NAME}`)).toBeLessThan(8 * MiB);
    expect(growth).toBeLessThan(32 * MiB);
  });

  it('a checksum list declaring 1 GiB: refused on its Content-Length', async () => {
    const { err } = await peakGrowth(() => fetchExpectedSha256(release('declared'), [KEY], 60_000));
    expect(err.message).toBe(
      `${CHECKSUMS_NAME} of v9.9.9 is ${1024 * MiB} bytes, more than its cap of ${MIRROR_CAPS.checksums}: refused`,
    );
    expect(await sent(`/declared/${CHECKSUMS_NAME}`)).toBeLessThan(8 * MiB);
  });

  it('an endless artifact: the download stops at its cap, the temp file is removed, memory flat', async () => {
    const dir = path.join(root, 'artifact');
    await mkdir(dir);
    const { err, growth } = await peakGrowth(() =>
      downloadArtifact(release('endless'), path.join(dir, ARTIFACT_NAME), 120_000),
    );
    expect(err.message).toBe(
      `${ARTIFACT_NAME} of v9.9.9 is larger than its cap of ${MIRROR_CAPS.artifact} bytes: refused`,
    );
    expect(await sent(`/endless/${ARTIFACT_NAME}`)).toBeLessThan(MIRROR_CAPS.artifact + 8 * MiB);
    expect(await readdir(dir)).toEqual([]);
    // The bytes went to the file, not to memory: what RSS gains is read buffers the collector has not
    // yet handed back (V8 collects external memory in steps of tens of MiB), far below the 256 MiB read.
    expect(growth).toBeLessThan(128 * MiB);
  }, 120_000);
});
