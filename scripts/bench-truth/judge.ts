/**
 * What the time-to-truth benchmark reads in the API's records (docs/benchmarks.md, "Time to truth"):
 * a session Established, a router Ready, which hint a session's lastError gives the peer, and a
 * figure's verdict against its target.
 */
import { SessionStatus } from '../../common/status.ts';
import type { RouterRecord, SessionRecord } from './rig.ts';

export const isActive = (s: SessionRecord): boolean => s.status === SessionStatus.ACTIVE;

/** ACTIVE with BGP Established (a record without bgpState says so by ACTIVE alone: docs/api.md). */
export const established = (s: SessionRecord): boolean =>
  isActive(s) && (s.bgpState ?? 'Established') === 'Established';

/** Established with no lastError: what each fault starts from and each recovery ends at. */
export const clean = (s: SessionRecord): boolean => established(s) && s.lastError === null;

export const ready = (r: RouterRecord): boolean =>
  r.status.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

const hint = (s: SessionRecord) => `${s.lastError?.code ?? ''} ${s.lastError?.message ?? ''}`;

/** The hint is what lastError tells the peer to check: its WireGuard (no handshake), else its BGP. */
export const wireguardHint = (s: SessionRecord): boolean =>
  /check the peer's WireGuard|no (WireGuard )?handshake/i.test(hint(s));

export const bgpHint = (s: SessionRecord): boolean => /BGP/.test(hint(s)) && !wireguardHint(s);

/** met when the figure was seen within its target; a figure not seen at all is MISSED. */
export function verdict(ms: number | undefined, targetMs: number): 'met' | 'MISSED' {
  return ms !== undefined && ms <= targetMs ? 'met' : 'MISSED';
}
