/**
 * An adopted protocol's text (agent/adopt/kept-protocol.ts): the hand-made template chain and body kept,
 * only the filters replaced, a closed channel left as written; the result parsed by the real `bird -p`.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { keepProtocol, renderKeptProtocol } from '../../../agent/adopt/kept-protocol.ts';
import { readBirdTree } from '../../../agent/adopt/read-files.ts';

const run = promisify(execFile);
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kept-protocol-'));
  await writeFile(
    join(dir, 'bird.conf'),
    `define OWNAS = 4242420066;
router id 172.20.66.1;
function ok() { return net.len > 8; }
template bgp base { local as OWNAS; hold time 30; /* comment */ graceful restart on; }
template bgp peer from base {
  path metric 1;
  ipv4 { import filter { if ok() then { accept; } else { reject; } }; export where ok(); import limit 1000 action block; };
  ipv6 { import all; export none; import keep filtered on; };
}
protocol bgp mp from peer { neighbor fe80::1 % 'dn42-a' as 4242421100; ipv4 { extended next hop on; export filter own; }; }
protocol bgp v4 from peer { neighbor 172.20.66.2 as 4242421100; direct; ipv6 { import none; export none; }; }
filter own { accept; }
`,
  );
});

afterAll(() => rm(dir, { recursive: true, force: true }));

it('keeps every option but the filters, under the protocol’s own name', async () => {
  const tree = await readBirdTree(join(dir, 'bird.conf'));
  const mp = keepProtocol(
    tree.protocols.find((p) => p.name === 'mp')!,
    tree.templates,
  );
  expect(mp.templates).toEqual([
    ['local as OWNAS', 'hold time 30', 'graceful restart on'],
    ['path metric 1', 'ipv4 { import limit 1000 action block; }', 'ipv6 { import keep filtered on; }'],
  ]);
  expect(mp.body).toEqual(["neighbor fe80::1 % 'dn42-a' as 4242421100", 'ipv4 { extended next hop on; }']);
  const filters = 'import where f(1); export where f(2);';
  const text = renderKeptProtocol(mp, filters);
  expect(text).toContain('protocol bgp mp from mp_kept1 {');
  expect(text).toContain(`ipv4 { extended next hop on; ${filters} }`);
  expect(text).toContain(`ipv6 { ${filters} }`);
  expect(text).not.toMatch(/ok\(\)|filter own|import all/);

  // the IPv4-only protocol of a pair: its closed IPv6 channel stays closed
  const v4 = keepProtocol(
    tree.protocols.find((p) => p.name === 'v4')!,
    tree.templates,
  );
  const v4Text = renderKeptProtocol(v4, filters);
  expect(v4Text).toContain('ipv6 { import none; export none; }');
  expect(v4Text).toContain(`ipv4 { ${filters} }`);

  // BIRD reads the result with the functions it names
  const conf = join(dir, 'rendered.conf');
  await writeFile(
    conf,
    `define OWNAS = 4242420066;\nrouter id 172.20.66.1;\nfunction f(int x) { return x > 0; }\n${text}${v4Text}`,
  );
  await run('bird', ['-p', '-c', conf]);
});

it('names a template the hand-made files do not define', async () => {
  const tree = await readBirdTree(join(dir, 'bird.conf'));
  const p = { ...tree.protocols[0]!, from: 'gone' };
  expect(() => keepProtocol(p, tree.templates)).toThrow(/protocol mp: template gone is not defined/);
});
