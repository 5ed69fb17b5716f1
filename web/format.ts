/** Times, sizes and durations in the reader's language. */
import { lang, t } from './i18n/index.ts';

export function dateTime(iso: string | null | undefined): string {
  if (!iso) return t('common.never');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return new Intl.DateTimeFormat(lang(), { dateStyle: 'medium', timeStyle: 'medium' }).format(d);
}

/** "3 minutes ago", in the current language; `now` for tests of the clock. */
export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return t('common.never');
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  if (Number.isNaN(seconds)) return iso;
  const rtf = new Intl.RelativeTimeFormat(lang(), { numeric: 'auto' });
  const abs = Math.abs(seconds);
  if (abs < 60) return rtf.format(seconds, 'second');
  if (abs < 3600) return rtf.format(Math.round(seconds / 60), 'minute');
  if (abs < 86400) return rtf.format(Math.round(seconds / 3600), 'hour');
  return rtf.format(Math.round(seconds / 86400), 'day');
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${new Intl.NumberFormat(lang(), { maximumFractionDigits: i ? 1 : 0 }).format(v)} ${units[i]}`;
}

export function rtt(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '–';
  return `${new Intl.NumberFormat(lang(), { maximumFractionDigits: 1 }).format(ms)} ms`;
}

export function count(n: number | null | undefined): string {
  if (n === null || n === undefined) return '–';
  return new Intl.NumberFormat(lang()).format(n);
}
