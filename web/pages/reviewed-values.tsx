/**
 * A session's values as a review shows them (the Reviews page, a session's review page): where a modify
 * sent a running session back to review, the values its router still runs struck through before the
 * ones asked, and a note saying so (docs/api.md, modify); where it was adopted from a router's
 * hand-made files, from which and by whom (docs/api.md, Adoptions); what the policy's checks found.
 */
import type { ComponentChildren } from 'preact';
import type { AdminSessionRecord, SessionRecord } from '../api.ts';
import { dateTime } from '../format.ts';
import { localText } from '../i18n/problems/index.ts';
import { t, type MessageKey } from '../i18n/index.ts';

/** The values a modify can change: those of the record, or the approved ones beside them. */
type Reviewed = Pick<
  SessionRecord,
  'ipv6' | 'ipv4' | 'ipv6LinkLocal' | 'endpoint' | 'publicKey' | 'mtu' | 'mpbgp' | 'extendedNextHop'
>;

const REVIEWED: { label: MessageKey; text: (v: Reviewed) => string; code: boolean }[] = [
  // empty: an adopted session without the peer's DN42 IPv6 (docs/api.md, Adoptions)
  { label: 'session.ipv6', text: (v) => v.ipv6 || t('session.none'), code: true },
  { label: 'session.ipv4', text: (v) => v.ipv4 ?? t('session.none'), code: true },
  { label: 'session.linkLocal', text: (v) => v.ipv6LinkLocal, code: true },
  { label: 'reviews.endpoint', text: (v) => v.endpoint ?? t('session.noEndpoint'), code: true },
  { label: 'session.publicKey', text: (v) => v.publicKey, code: true },
  { label: 'session.mtu', text: (v) => String(v.mtu), code: false },
  {
    label: 'session.bgp',
    text: (v) =>
      [v.mpbgp ? 'MP-BGP' : t('session.noMpbgp'), v.extendedNextHop ? t('session.enh') : '']
        .filter(Boolean)
        .join(', '),
    code: false,
  },
];

/** The rows of a review's list: each value, old → new where a modify in review changes it. */
export function reviewedRows(s: SessionRecord): [string, ComponentChildren][] {
  return REVIEWED.map(({ label, text, code }) => {
    const now = text(s);
    const was = s.approved ? text(s.approved) : undefined;
    const shown = (value: string) => (code ? <code class="wrap">{value}</code> : value);
    if (was === undefined || was === now) return [t(label), shown(now)];
    return [
      t(label),
      <span class="changed" data-testid="changed">
        <del>{shown(was)}</del> <span aria-hidden="true">→</span>
        <span class="visually-hidden">{t('reviews.becomes')}</span> <ins>{shown(now)}</ins>
      </span>,
    ];
  });
}

/** The note of a modify in review: the router keeps the approved values, in the status named. */
export function ModifiedNotice(props: { session: SessionRecord }) {
  const { approved } = props.session;
  if (!approved) return null;
  return (
    <p class="warning" data-testid="modified">
      {t('reviews.modified', { status: approved.statusName })}
    </p>
  );
}

/** The note of an adopted session: the hand-made files it came from, who adopted it, what it keeps. */
export function AdoptedNotice(props: { session: Pick<SessionRecord, 'adopted'> }) {
  const { adopted } = props.session;
  if (!adopted) return null;
  return (
    <div class="adopted" data-testid="adopted">
      <p>
        {t('adopted.from', { files: adopted.files.join(', '), by: adopted.by, at: dateTime(adopted.at) })}
      </p>
      <p class="muted">
        {t('adopted.kept', { interface: adopted.interface, protocols: adopted.protocols.join(', ') })}
      </p>
    </div>
  );
}

/** The policy's checks of a session in review: passed, or each violation at its field; `children` heads it. */
export function PolicyChecks(props: {
  violations: AdminSessionRecord['policyViolations'];
  children?: ComponentChildren;
}) {
  const { violations } = props;
  return (
    <div class={violations.length ? 'checks-failed' : 'checks-passed'}>
      {props.children}
      {violations.length === 0 ? (
        <p>{t('reviews.checksPassed')}</p>
      ) : (
        <ul>
          {violations.map((v) => (
            <li key={v.pointer + v.message}>
              <code>{v.pointer}</code> {localText(v)}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
