/** `peerops session history`'s table: one row per point of GET /session/:uuid/history (docs/cli.md). */
import type { SessionHistoryResponse } from '../common/history.ts';
import { table } from './client.ts';

/** Bytes with a binary unit: 1.5 MiB. */
export function bytes(n: number | null): string | null {
  if (n === null) return null;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export function historyTable(res: SessionHistoryResponse): string {
  if (res.points.length === 0) return `no reports for session ${res.uuid} in the last ${res.range}`;
  return table(
    ['TIME', 'RTT MS', 'RECEIVED', 'SENT', 'ROUTES IN', 'ROUTES OUT'],
    res.points.map((p) => [
      p.at.slice(0, 16).replace('T', ' '),
      p.rtt,
      bytes(p.rxBytes),
      bytes(p.txBytes),
      p.routesImported,
      p.routesExported,
    ]),
  );
}
