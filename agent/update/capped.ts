/**
 * Everything the updater reads from a release mirror, read under a cap of its own while it streams
 * (docs/agent.md, auto-update): a mirror is not trusted until the signature verifies, so an endless or
 * huge answer must cost at most its cap in memory. A declared Content-Length over the cap is refused
 * before the body is read; otherwise the read stops, and the connection is closed, at the first chunk
 * past the cap.
 */
import { UpdateError } from './releases.ts';

/** The largest answer of each read, in bytes. */
export const MIRROR_CAPS = {
  /** A page of the GitHub releases API: 30 releases, their notes and assets (real pages are ~100-600 KB). */
  listing: 4 * 1024 * 1024,
  /** SHA256SUMS: a line per release file. */
  checksums: 64 * 1024,
  /** SHA256SUMS.sig: one armored SSH signature (under 1 KB for the keys autoUpdate.publicKeys takes). */
  signature: 16 * 1024,
  /** peerops.mjs, the bundle. */
  artifact: 256 * 1024 * 1024,
} as const;

export interface CappedRequest {
  url: string;
  /** What it is, for the error: `SHA256SUMS of v1.2.0`. */
  what: string;
  cap: number;
  timeoutMs: number;
  headers?: Record<string, string>;
}

/**
 * GETs `url` and yields its body's chunks, throwing UpdateError (and aborting the request) as soon as
 * the total passes `cap` or the status is not 2xx.
 */
export async function* streamCapped(req: CappedRequest): AsyncGenerator<Uint8Array> {
  const stop = new AbortController();
  const res = await fetch(req.url, {
    ...(req.headers ? { headers: req.headers } : {}),
    signal: AbortSignal.any([stop.signal, AbortSignal.timeout(req.timeoutMs)]),
  });
  const refuse = (why: string): never => {
    throw new UpdateError(`${req.what} ${why}: refused`);
  };
  try {
    if (!res.ok || !res.body) refuse(`answered HTTP ${res.status}`);
    const declared = Number(res.headers.get('content-length') ?? NaN);
    if (declared > req.cap) refuse(`is ${declared} bytes, more than its cap of ${req.cap}`);
    let size = 0;
    for await (const chunk of res.body as ReadableStream<Uint8Array>) {
      size += chunk.byteLength;
      if (size > req.cap) refuse(`is larger than its cap of ${req.cap} bytes`);
      yield chunk;
    }
  } finally {
    // an early return or a throw leaves the rest unread: close the connection instead of draining it
    stop.abort();
  }
}

/** The whole body of a small answer (streamCapped), at most `cap` bytes. */
export async function readCapped(req: CappedRequest): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of streamCapped(req)) chunks.push(chunk);
  return Buffer.concat(chunks);
}
