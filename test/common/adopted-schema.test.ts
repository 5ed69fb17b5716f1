/** The `adopted` block of a session (docs/api.md, Adoptions): the kept names' rules and bounds. */
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AgentSession } from '../../common/agent-api.ts';
import { SessionSpec } from '../../common/schema.ts';
import { validate } from '../../common/validate.ts';

const key = () => randomBytes(32).toString('base64');

const adopted = (extra: Record<string, unknown> = {}) => ({
  by: 'admin AS4242420000',
  at: '2026-11-28T10:00:00.000Z',
  files: ['/etc/wireguard/wg_alice.conf', '/etc/bird/peers/alice.conf'],
  interface: 'wg_alice',
  protocols: ['dn42_alice'],
  ...extra,
});

function pointers(block: Record<string, unknown>): string[] {
  const r = validate(SessionSpec, {
    uuid: randomUUID(),
    asn: 4242420001,
    router: 'fra1',
    ipv6: 'fd42:1::1',
    linkLocal: 'fe80::1',
    publicKey: key(),
    listenPort: 20001,
    adopted: block,
  });
  return r.ok ? [] : r.errors.map((e) => e.pointer);
}

describe('adopted', () => {
  it('takes the names of a hand-made peer', () => {
    expect(pointers(adopted())).toEqual([]);
    expect(
      pointers(adopted({ interface: 'dn42-4242423', protocols: ['v6_x', 'v4_x'], publicKey: key() })),
    ).toEqual([]);
  });

  it.each([
    ['a 16-character interface', { interface: 'wg_abcdefghijklm' }, '/adopted/interface'],
    ['interface ..', { interface: '..' }, '/adopted/interface'],
    ['an interface with a slash', { interface: 'wg/x' }, '/adopted/interface'],
    ['an interface with a space', { interface: 'wg x' }, '/adopted/interface'],
    ['a protocol with a dash', { protocols: ['dn42-x'] }, '/adopted/protocols/0'],
    ['a protocol starting with a digit', { protocols: ['4242x'] }, '/adopted/protocols/0'],
    ['three protocols', { protocols: ['a', 'b', 'c'] }, '/adopted/protocols'],
    ['no protocol', { protocols: [] }, '/adopted/protocols'],
    ['a relative file', { files: ['peers/x.conf'] }, '/adopted/files/0'],
    ['a file with a newline', { files: ['/etc/x\n.conf'] }, '/adopted/files/0'],
    ['nine files', { files: Array.from({ length: 9 }, (_, i) => `/etc/bird/p${i}.conf`) }, '/adopted/files'],
    ['a bad key', { publicKey: 'x' }, '/adopted/publicKey'],
    ['an unknown field', { note: 'x' }, '/adopted/note'],
  ])('refuses %s', (_what, extra, pointer) => {
    expect(pointers(adopted(extra))).toContain(pointer);
  });

  it('is recorded with who and when', () => {
    const { by: _by, ...noBy } = adopted();
    expect(pointers(noBy)).toContain('/adopted/by');
  });

  it('reaches the agent without who and when', () => {
    const base = {
      uuid: randomUUID(),
      asn: 4242420001,
      status: 1,
      statusName: 'ACTIVE',
      interface: 'wg_20001',
      listenPort: 20001,
      endpoint: null,
      publicKey: key(),
      ipv6: 'fd42:1::1',
      linkLocal: 'fe80::1',
      ipv4: null,
      mtu: 1420,
      mpbgp: true,
      extendedNextHop: true,
      restartGeneration: 0,
    };
    const { by: _by, at: _at, ...names } = adopted();
    expect(validate(AgentSession, { ...base, adopted: names }).ok).toBe(true);
    expect(validate(AgentSession, { ...base, adopted: adopted() }).ok).toBe(false);
  });
});
