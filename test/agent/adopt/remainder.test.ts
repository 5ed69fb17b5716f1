/**
 * The hand-made protocols a takeover leaves running (agent/adopt/remainder.ts): what a set-aside file
 * defines besides the adopted protocols, with the definitions it uses from anywhere in the hand-made
 * tree, renamed where BIRD does not compare the name or where peerops's main file defines it; the
 * result, beside a main file defining peerops's names, parsed by the real `bird -p`.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readBirdTree } from '../../../agent/adopt/read-files.ts';
import { definedNames, renderRemainder } from '../../../agent/adopt/remainder.ts';

const run = promisify(execFile);
let dir: string;

/** What peerops's main file defines of the names a hand-made one uses too. */
const PEEROPS_MAIN = `define OWNAS = 4242420066;
router id 172.20.66.1;
function is_valid_network() { return net.len > 8; }
template bgp dnpeers { local as OWNAS; }
`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'remainder-'));
  await writeFile(
    join(dir, 'bird.conf'),
    `define OWNAS = 4242420066;
define LIMIT = 1000;
router id 172.20.66.1;
ipv6 table hand6;
attribute int hops;
function is_valid_network() { return net.len > 8; } # clashes with peerops's
function own_net() { return net ~ [fd42:66::/48+]; }
function unused() { return false; }
filter own_in { if is_valid_network() && !own_net() then accept; reject; }
template bgp dnpeers { local as OWNAS; hold time 30; ipv6 { table hand6; import filter own_in; export none; import limit LIMIT action block; }; }
include "peers.conf";
`,
  );
  await writeFile(
    join(dir, 'peers.conf'),
    `protocol bgp adopted from dnpeers { neighbor fe80::1%'wg-a' as 4242421100; }
protocol bgp left from dnpeers {
  neighbor fe80::2%'wg-b' as 4242421101;
  ipv6 { import where own_net() || is_valid_network(); export none; };
}
protocol static { ipv6; route fd42:66:1::/48 unreachable; }
`,
  );
});

afterAll(() => rm(dir, { recursive: true, force: true }));

it('keeps what is left of a set-aside file, self-contained, and BIRD parses it beside peerops’s names', async () => {
  // the hand-made tree as BIRD ran it
  await run('bird', ['-p', '-c', join(dir, 'bird.conf')]);
  const tree = await readBirdTree(join(dir, 'bird.conf'));
  const text = renderRemainder({
    files: tree.files,
    setAside: new Set([join(dir, 'peers.conf')]),
    adopted: new Set(['adopted']),
    mainNames: definedNames(PEEROPS_MAIN),
  });
  expect(text).toBeDefined();
  // the left protocols, not the adopted one
  expect(text).toContain('protocol bgp left from hand_dnpeers');
  expect(text).toContain('protocol static');
  expect(text).not.toContain('protocol bgp adopted');
  // templates and constants renamed; a function peerops's main file defines renamed, the others kept
  expect(text).toContain('template bgp hand_dnpeers { local as hand_OWNAS;');
  expect(text).toContain('import limit hand_LIMIT action block');
  expect(text).toContain('function hand_is_valid_network()');
  expect(text).toContain('import where own_net() || hand_is_valid_network();');
  expect(text).toContain('filter own_in { if hand_is_valid_network() && !own_net() then accept; reject; }');
  // a table keeps its name (another name is another table); what nothing uses stays out
  expect(text).toContain('ipv6 table hand6;');
  expect(text).not.toContain('unused');
  expect(text).not.toContain('attribute');

  await writeFile(join(dir, 'kept.conf'), text!);
  await writeFile(join(dir, 'main.conf'), `${PEEROPS_MAIN}include "kept.conf";\n`);
  const parsed = await run('bird', ['-p', '-c', join(dir, 'main.conf')]).then(
    () => 'ok',
    (err: { stderr: string }) => err.stderr,
  );
  expect(parsed).toBe('ok');
  // the file as written, beside peerops's main file instead of the hand-made one: BIRD refuses it
  await writeFile(join(dir, 'clash.conf'), `${PEEROPS_MAIN}include "peers.conf";\n`);
  await expect(run('bird', ['-p', '-c', join(dir, 'clash.conf')])).rejects.toThrow(
    /peers\.conf:\d+:\d+ syntax error/,
  );
});

it('keeps nothing when the set-aside files define only adopted protocols', async () => {
  const only = join(dir, 'only.conf');
  await writeFile(only, `protocol bgp adopted from dnpeers { neighbor fe80::1%'wg-a' as 4242421100; }\n`);
  await writeFile(join(dir, 'only-main.conf'), `${PEEROPS_MAIN}include "only.conf";\n`);
  const onlyTree = await readBirdTree(join(dir, 'only-main.conf'));
  expect(
    renderRemainder({
      files: onlyTree.files,
      setAside: new Set([only]),
      adopted: new Set(['adopted']),
      mainNames: new Set(),
    }),
  ).toBeUndefined();
});
