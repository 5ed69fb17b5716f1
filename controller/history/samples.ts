/**
 * A session's history samples and their file encoding (docs/store.md, Session history): one fixed-size
 * record per sample, so that a file cut by a crash is whole again once its partial last record is
 * dropped, and a session-day at 5-minute resolution (288 records) stays under 4 KiB.
 *
 * Record, 14 bytes little-endian: the minute (Unix minutes, uint32); RTT in 0.1 ms (uint16); bytes
 * received and sent in the sample's span (uint16 each, a 16-bit float: exact below 2,048, within 0.05 %
 * above, up to 4.4 TB); routes imported and exported (uint16, at most 65,534). 0xFFFF is "not known".
 */

export const RECORD_BYTES = 14;
const UNKNOWN = 0xffff;
const UINT16_MAX_KNOWN = 0xfffe;
const MANTISSA_BITS = 11;

export interface Sample {
  /** Unix minutes of the sample (its span's start once merged). */
  minute: number;
  /** Round-trip time in ms; null: the peer did not answer. */
  rtt: number | null;
  /** Bytes received from the peer / sent to it in the sample's span; null: not known (no earlier counter). */
  rxBytes: number | null;
  txBytes: number | null;
  routesImported: number | null;
  /** null: an agent older than the field. */
  routesExported: number | null;
}

/** A sample of the minute with nothing known yet, for a source to fill in. */
export function emptySample(minute: number): Sample {
  return { minute, rtt: null, rxBytes: null, txBytes: null, routesImported: null, routesExported: null };
}

/** A byte count as the 16-bit float: mantissa (11 bits) times 2^exponent (5 bits). */
export function encodeCount(value: number): number {
  if (value < 1 << MANTISSA_BITS) return Math.max(0, Math.round(value));
  let exponent = Math.floor(Math.log2(value)) - (MANTISSA_BITS - 1);
  let mantissa = Math.round(value / 2 ** exponent);
  if (mantissa >= 1 << MANTISSA_BITS) mantissa = Math.round(value / 2 ** ++exponent);
  if (exponent > 31) return (31 << MANTISSA_BITS) | ((1 << MANTISSA_BITS) - 2);
  // 0xFFFF (exponent 31, mantissa 2047) means "not known": the largest count takes mantissa 2046
  if (exponent === 31) mantissa = Math.min(mantissa, (1 << MANTISSA_BITS) - 2);
  return (exponent << MANTISSA_BITS) | mantissa;
}

export function decodeCount(code: number): number {
  const exponent = code >> MANTISSA_BITS;
  const mantissa = code & ((1 << MANTISSA_BITS) - 1);
  return exponent === 0 ? mantissa : mantissa * 2 ** exponent;
}

const small = (value: number | null, scale = 1): number =>
  value === null ? UNKNOWN : Math.min(UINT16_MAX_KNOWN, Math.max(0, Math.round(value * scale)));

export function encodeSample(sample: Sample, into: Buffer, offset: number): void {
  into.writeUInt32LE(sample.minute, offset);
  into.writeUInt16LE(small(sample.rtt, 10), offset + 4);
  into.writeUInt16LE(sample.rxBytes === null ? UNKNOWN : encodeCount(sample.rxBytes), offset + 6);
  into.writeUInt16LE(sample.txBytes === null ? UNKNOWN : encodeCount(sample.txBytes), offset + 8);
  into.writeUInt16LE(small(sample.routesImported), offset + 10);
  into.writeUInt16LE(small(sample.routesExported), offset + 12);
}

export function encodeSamples(samples: readonly Sample[]): Buffer {
  const out = Buffer.allocUnsafe(samples.length * RECORD_BYTES);
  samples.forEach((s, i) => encodeSample(s, out, i * RECORD_BYTES));
  return out;
}

const known = (code: number): number | null => (code === UNKNOWN ? null : code);

/** The whole records in `bytes`, from minute `from` on; a partial last record (a crash mid-append) is left out. */
export function decodeSamples(bytes: Buffer, from = 0): Sample[] {
  const out: Sample[] = [];
  for (let o = 0; o + RECORD_BYTES <= bytes.length; o += RECORD_BYTES) {
    const minute = bytes.readUInt32LE(o);
    if (minute < from) continue;
    const rtt = known(bytes.readUInt16LE(o + 4));
    const rx = known(bytes.readUInt16LE(o + 6));
    const tx = known(bytes.readUInt16LE(o + 8));
    out.push({
      minute,
      rtt: rtt === null ? null : rtt / 10,
      rxBytes: rx === null ? null : decodeCount(rx),
      txBytes: tx === null ? null : decodeCount(tx),
      routesImported: known(bytes.readUInt16LE(o + 10)),
      routesExported: known(bytes.readUInt16LE(o + 12)),
    });
  }
  return out;
}

/**
 * Samples merged into spans of `stepMinutes` (aligned to Unix time), in time order, spans without a
 * sample left out: RTT the mean of the known ones, bytes the sum, route counts the last known.
 */
export function mergeSamples(samples: readonly Sample[], stepMinutes: number): Sample[] {
  const spans = new Map<number, { sample: Sample; rtts: number; rttSum: number }>();
  const sorted = [...samples].sort((a, b) => a.minute - b.minute);
  for (const s of sorted) {
    const minute = s.minute - (s.minute % stepMinutes);
    let span = spans.get(minute);
    if (!span) {
      span = {
        sample: emptySample(minute),
        rtts: 0,
        rttSum: 0,
      };
      spans.set(minute, span);
    }
    const m = span.sample;
    if (s.rtt !== null) {
      span.rtts++;
      span.rttSum += s.rtt;
      m.rtt = span.rttSum / span.rtts;
    }
    if (s.rxBytes !== null) m.rxBytes = (m.rxBytes ?? 0) + s.rxBytes;
    if (s.txBytes !== null) m.txBytes = (m.txBytes ?? 0) + s.txBytes;
    if (s.routesImported !== null) m.routesImported = s.routesImported;
    if (s.routesExported !== null) m.routesExported = s.routesExported;
  }
  return [...spans.values()].map((s) => s.sample);
}
