/**
 * A DNS server on a loopback UDP port for the notification tests, answering A and AAAA queries as the test
 * says: `answer(name, type, n)` gives the addresses for the n-th query (from 1) of that name and type
 * (TTL 0, so nothing may keep them), or `undefined` to swallow the query and never answer. The test
 * points the dispatcher's `dnsServers` at it: the machine's resolver is not the test's to change.
 */
import { createSocket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import ipaddr from 'ipaddr.js';

export type RecordType = 'A' | 'AAAA';

export interface DnsServer {
  /** `127.0.0.1:<port>`, for `dnsServers`. */
  server: string;
  /** Queries received, as `<name> <type>`, in order (swallowed ones too). */
  queries: string[];
  close(): Promise<void>;
}

const TYPES: Record<number, RecordType> = { 1: 'A', 28: 'AAAA' };

export async function startDns(
  answer: (name: string, type: RecordType, n: number) => string[] | undefined,
): Promise<DnsServer> {
  const socket = createSocket('udp4');
  const queries: string[] = [];
  socket.on('message', (query, from) => {
    // header (12 bytes), then one question: labels up to a zero length, QTYPE, QCLASS
    let at = 12;
    const labels: string[] = [];
    while (at < query.length && query[at] !== 0) {
      const length = query[at] as number;
      labels.push(query.subarray(at + 1, at + 1 + length).toString('ascii'));
      at += 1 + length;
    }
    const questionEnd = at + 5;
    const type = TYPES[query.readUInt16BE(at + 1)];
    const name = labels.join('.').toLowerCase();
    queries.push(`${name} ${type ?? 'other'}`);
    const n = queries.filter((q) => q === `${name} ${type}`).length;
    const addresses = type ? answer(name, type, n) : [];
    if (addresses === undefined) return;
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2); // the query's id
    header.writeUInt16BE(0x8180, 2); // a response, recursion desired and available, no error
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(addresses.length, 6);
    const records = addresses.map((address) => {
      const bytes = Buffer.from(ipaddr.parse(address).toByteArray());
      const record = Buffer.alloc(12);
      record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      record.writeUInt16BE(bytes.length === 4 ? 1 : 28, 2);
      record.writeUInt16BE(1, 4); // IN
      record.writeUInt32BE(0, 6); // TTL 0
      record.writeUInt16BE(bytes.length, 10);
      return Buffer.concat([record, bytes]);
    });
    socket.send(
      Buffer.concat([header, query.subarray(12, questionEnd), ...records]),
      from.port,
      from.address,
    );
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address() as AddressInfo;
  return {
    server: `127.0.0.1:${port}`,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
