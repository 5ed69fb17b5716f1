/**
 * Times BIRD prints (a protocol's `since`, "Last reconfiguration on …"). BIRD converts its monotonic clock
 * to wall time on every query, so the same instant may come back one millisecond apart: compare them as
 * times, never as strings.
 */

/** Milliseconds since midnight of the HH:MM:SS[.mmm] at the end of `text`; NaN without one. */
function birdTimeMs(text: string | undefined): number {
  const m = /(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?$/.exec(text ?? '');
  if (!m) return NaN;
  return (
    ((Number(m[1]) * 60 + Number(m[2])) * 60 + Number(m[3])) * 1000 + Number((m[4] ?? '0').padEnd(3, '0'))
  );
}

/** How far apart two printed times are, in ms (across midnight too); NaN when one has no time. */
export function birdTimeApartMs(a: string | undefined, b: string | undefined): number {
  const apart = Math.abs(birdTimeMs(a) - birdTimeMs(b));
  return Math.min(apart, 86_400_000 - apart);
}
