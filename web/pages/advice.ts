/**
 * What to do about a session's state: the checklist of docs/troubleshooting.md for that state, in the
 * reader's words, filled with the session's own values.
 */
import type { SessionRecord } from '../api.ts';
import { ago, dateTime } from '../format.ts';
import { t, type MessageKey } from '../i18n/index.ts';

export function statusWords(code: number): string {
  const key = `status.${code}` as MessageKey;
  return t(key);
}

/** A session's status in words: a queued one says who it waits for (docs/user-guide.md, statuses). */
export function sessionWords(s: SessionRecord): string {
  // a change in review: the router keeps running what was approved (docs/api.md, modify)
  if (s.status === 3 && s.approved) return t('status.3.running', { status: s.approved.statusName });
  if (s.status !== 4 || !s.waiting) return statusWords(s.status);
  const since = s.waiting.since ? `${dateTime(s.waiting.since)} (${ago(s.waiting.since)})` : '–';
  if (s.waiting.for === 'peer') return t('status.4.peer', { since });
  if (s.waiting.for === 'agent') return t('status.4.agent', { since });
  return statusWords(s.status);
}

export function advice(s: SessionRecord, networkAsn: number | undefined): string[] {
  const values = {
    serverEndpoint: s.serverEndpoint,
    port: s.listenPort,
    linkLocal: s.ipv6LinkLocal,
    asn: s.asn,
    networkAsn: networkAsn ?? t('common.unknownAsn'),
    mtu: s.mtu,
    iface: s.interface,
    serverPublicKey: s.serverPublicKey ?? '–',
    serverLinkLocal: s.serverLinkLocal ?? '–',
    publicKey: s.publicKey,
    endpoint: s.endpoint ?? '–',
  };
  const keys = adviceKeys(s);
  return keys.map((k) => t(k, values));
}

function adviceKeys(s: SessionRecord): MessageKey[] {
  switch (s.status) {
    case 3:
      return ['advice.pending'];
    case 4:
      if (s.waiting?.for === 'peer')
        // the peer's checklist (docs/troubleshooting.md, "The router waits for your side")
        return [
          'advice.waiting.files',
          'advice.waiting.wg',
          s.endpoint ? 'advice.waiting.endpoint' : 'advice.waiting.noEndpoint',
          'advice.waiting.addresses',
          'advice.waiting.bgp',
          'advice.waiting.ports',
        ];
      return s.waiting?.for === 'agent' ? ['advice.agentQuiet'] : ['advice.queued'];
    case 5:
      return ['advice.deleting'];
    case 0:
      return [s.decision?.reason ? 'advice.disabledReason' : 'advice.disabled'];
    case 7:
      return ['advice.rejected'];
    case 8:
      return ['advice.purged'];
    case 6:
      return ['advice.setupFailed', 'advice.setupFailedData'];
    case 2:
      if (!s.lastHandshake)
        return [
          'advice.wg.none',
          'advice.wg.endpoint',
          'advice.wg.key',
          'advice.wg.keepalive',
          'advice.wg.firewall',
        ];
      return [
        'advice.bgp.down',
        'advice.bgp.neighbor',
        'advice.bgp.linkLocal',
        'advice.bgp.mtu',
        'advice.bgp.firewall',
      ];
    case 1:
      if (s.bgpState && s.bgpState !== 'Established') return ['advice.bgp.down', 'advice.bgp.neighbor'];
      if (s.metrics && s.metrics.routesImported === 0) return ['advice.noRoutes'];
      return [];
    default:
      return [];
  }
}
