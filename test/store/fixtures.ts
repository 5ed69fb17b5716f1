/** Valid specs for store tests, built only from the shared schema types. */
import { randomBytes, randomUUID } from 'node:crypto';
import type { PolicySpec, RouterSpec, SessionStatusRecord } from '../../common/schema.ts';
import type { Actor, NewSession } from '../../controller/store/store.ts';

export const admin: Actor = { name: 'admin AS4242420000', role: 'admin', asn: 4242420000 };
export const user = (asn: number): Actor => ({ name: `AS${asn}`, role: 'user', asn });

export function wgKey(): string {
  return randomBytes(32).toString('base64');
}

export function routerSpec(nodeId: number, extra: Partial<RouterSpec> = {}): RouterSpec {
  return {
    uuid: randomUUID(),
    displayName: `Router ${nodeId}`,
    nodeId,
    region: 'eu-central',
    endpointHost: `r${nodeId}.example.net`,
    publicKey: wgKey(),
    linkLocal: `fe80::${nodeId.toString(16)}`,
    loopback: { ipv6: `fd00::${nodeId.toString(16)}` },
    ...extra,
  };
}

export function newSession(asn: number, router: string, extra: Partial<NewSession> = {}): NewSession {
  return {
    asn,
    router,
    // Each ASN its own address: another ASN's session address is refused (rules.ts), at load too.
    ipv6: `fd42:1:${(asn % 0x10000).toString(16)}::1`,
    linkLocal: 'fe80::1234',
    publicKey: wgKey(),
    mtu: 1420,
    ...extra,
  };
}

export const pending: SessionStatusRecord = { code: 3, name: 'PENDING_REVIEW' };
export const queued: SessionStatusRecord = { code: 4, name: 'QUEUED_FOR_SETUP' };

export const defaultPolicy: PolicySpec = { dn42Asn: 4242420000, blockedAsns: [4242429999] };
