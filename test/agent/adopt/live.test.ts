/**
 * `peerops adopt` reading a live wireguard-go tunnel in a network namespace the test creates: what no
 * file says (listen port, peer key and endpoint set with `wg set` by a script) comes from the link.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Plan } from '../../../agent/adopt/plan.ts';
import { NetnsLab, type Namespace } from '../../support/netns.ts';

const lab = new NetnsLab('adl');
const KEY = Buffer.alloc(32, 7).toString('base64');
let ns: Namespace;
let dir: string;
let port: number;

beforeAll(async () => {
  ns = await lab.namespace('r');
  dir = await mkdtemp(join(tmpdir(), 'adopt-live-'));
  port = lab.uniquePort();
  const iface = `wg_${port}`;
  await ns.run('wireguard-go', [iface]);
  const keyFile = join(dir, 'key');
  await writeFile(keyFile, Buffer.alloc(32, 9).toString('base64'));
  await ns.run('wg', ['set', iface, 'listen-port', String(port + 10000), 'private-key', keyFile]);
  await ns.run('wg', ['set', iface, 'peer', KEY, 'endpoint', '192.0.2.7:23456', 'allowed-ips', '::/0']);
  await ns.run('ip', ['addr', 'add', 'fe80::1/64', 'dev', iface]);
  await ns.run('ip', ['link', 'set', iface, 'up']);
  await writeFile(
    join(dir, 'bird.conf'),
    `protocol bgp live_peer { local as 4242420000; neighbor fe80::7%${iface} as 4242420107; ipv4 {}; ipv6 {}; }\n`,
  );
});

afterAll(async () => {
  await lab.cleanup();
  await rm(dir, { recursive: true, force: true });
});

it('fills a tunnel no file defines from the live link and wg show all dump', async () => {
  const out = await ns.run(process.execPath, [
    'bin/peerops.ts',
    'adopt',
    '--router=fra1',
    `--wireguard-dir=${join(dir, 'none')}`,
    `--networkd-dir=${join(dir, 'none')}`,
    `--bird-conf=${join(dir, 'bird.conf')}`,
    '--port-min=20000',
    '--port-max=40000',
    '-o',
    'json',
  ]);
  const plan = JSON.parse(out) as Plan;
  expect(plan.notAdopted).toEqual([]);
  expect(plan.sessions).toMatchObject([
    {
      asn: 4242420107,
      listenPort: port + 10000,
      publicKey: KEY,
      endpoint: '192.0.2.7:23456',
      linkLocal: 'fe80::7',
      mpbgp: true,
      adopted: {
        interface: `wg_${port}`,
        protocols: ['live_peer'],
        files: [`live link wg_${port}`, join(dir, 'bird.conf')],
      },
    },
  ]);
});
