/**
 * Status conditions as the CLI shows them (docs/cli.md, Routers): a cell naming those not in their
 * healthy state, a warning line for each, and kubectl's and Flux's table of TYPE, STATUS, REASON, AGE
 * and MESSAGE. Which status is healthy is common/conditions.ts's to say.
 */
import { isHealthy } from '../common/conditions.ts';
import type { Condition } from '../common/schema.ts';
import { table } from './client.ts';

/** A condition as the API answers it; older controllers may leave out the transition time. */
export type ShownCondition = Pick<Condition, 'type' | 'status' | 'reason' | 'message'> &
  Partial<Pick<Condition, 'lastTransitionTime'>>;

/** Whose conditions: a router's name and what it reported. */
export interface ConditionsOf {
  name: string;
  conditions?: readonly ShownCondition[] | undefined;
}

/**
 * The time since `iso` as kubectl prints AGE (apimachinery's HumanDuration): `90s`, `5m30s`, `45m`,
 * `3h20m`, `30h`, `3d4h`, `200d`, `2y10d`; `-` without a time.
 */
export function age(iso: string | undefined, now = Date.now()): string {
  const at = iso === undefined ? Number.NaN : Date.parse(iso);
  if (Number.isNaN(at)) return '-';
  const s = Math.floor((now - at) / 1000);
  if (s < -1) return '<invalid>';
  if (s < 120) return `${Math.max(s, 0)}s`;
  const two = (big: number, bigUnit: string, small: number, smallUnit: string) =>
    small === 0 ? `${big}${bigUnit}` : `${big}${bigUnit}${small}${smallUnit}`;
  const m = Math.floor(s / 60);
  if (m < 10) return two(m, 'm', s % 60, 's');
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return two(h, 'h', m % 60, 'm');
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (d < 8) return two(d, 'd', h % 24, 'h');
  if (d < 730) return `${d}d`;
  const y = Math.floor(d / 365);
  return d < 2920 ? two(y, 'y', d % 365, 'd') : `${y}y`;
}

/** The list's CONDITIONS cell: those not healthy as `Type=Status (Reason)`, `ok`, or `-` before any report. */
export function conditionsCell(conditions: readonly ShownCondition[] | undefined): string {
  if (!conditions?.length) return '-';
  const bad = conditions.filter((c) => !isHealthy(c));
  return bad.length ? bad.map((c) => `${c.type}=${c.status} (${c.reason})`).join(', ') : 'ok';
}

/** One `warning:` line per condition not in its healthy state, with its message; '' when there is none. */
export function conditionWarnings(objects: readonly ConditionsOf[]): string {
  const lines = objects.flatMap((o) =>
    (o.conditions ?? [])
      .filter((c) => !isHealthy(c))
      .map((c) => `warning: ${o.name}: ${c.type} ${c.status} (${c.reason}): ${c.message}`),
  );
  return lines.length ? `\n\n${lines.join('\n')}` : '';
}

/** Every condition of each object, as `kubectl describe` and `flux get` list them; '' when there is none. */
export function conditionsTable(objects: readonly ConditionsOf[], subject: string, now = Date.now()): string {
  const rows = objects.flatMap((o) =>
    (o.conditions ?? []).map((c) => [
      o.name,
      c.type,
      c.status,
      c.reason,
      age(c.lastTransitionTime, now),
      c.message,
    ]),
  );
  return rows.length ? `\n\n${table([subject, 'TYPE', 'STATUS', 'REASON', 'AGE', 'MESSAGE'], rows)}` : '';
}
