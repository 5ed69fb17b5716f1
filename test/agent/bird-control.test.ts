/** BIRD's control socket protocol against a real BIRD 2: replies, errors, configure verdicts, reconnects. */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BirdControl, BirdError, ReplyParser } from '../../agent/bird/control.ts';
import { NetnsLab, type BirdInstance, type Namespace } from '../support/netns.ts';

const lab = new NetnsLab('agb');
let ns: Namespace;
let bird: BirdInstance;
let control: BirdControl;
const CONFIG =
  'router id 10.0.0.1;\nprotocol device {}\nprotocol static st1 { ipv6; route fd00:1::/48 unreachable; }\n';

beforeAll(async () => {
  ns = await lab.namespace('b');
  bird = await lab.startBird(ns, CONFIG);
  control = new BirdControl(bird.socket, { poolSize: 1, poolSizeMax: 3 });
});
afterAll(async () => {
  control?.close();
  await lab.cleanup();
});

describe('BIRD control socket', () => {
  it('parses numbered replies with continuation lines', () => {
    const p = new ReplyParser();
    expect(p.push('0001 BIRD 2.0.12 ready.\n2002-Name  Proto\n1002-st1  Static\n')).toHaveLength(1);
    const [reply] = p.push(' more text\n0000 \n');
    expect(reply?.code).toBe(0);
    expect(reply?.lines.map((l) => l.code)).toEqual([2002, 1002, 1002, 0]);
    expect(reply?.lines[2]?.text).toBe('more text');
  });

  it('show protocols all: state, since, routes imported', async () => {
    const [st] = await control.protocols('st1');
    expect(st).toMatchObject({ name: 'st1', proto: 'Static', state: 'up', routesImported: 1 });
    expect(st?.since).toMatch(/\d{2}:\d{2}/);
    expect(await control.protocols('nope')).toEqual([]);
  });

  it('bgpStates: each BGP protocol with its state from the one-line `show protocols`, nothing else', async () => {
    const withBgp = await lab.startBird(
      ns,
      `${CONFIG}protocol bgp b1 { local as 65001; neighbor fd00:9::2 as 65002; connect delay time 1; ipv6 { import none; export none; }; }\n`,
    );
    const own = new BirdControl(withBgp.socket);
    try {
      const states = await own.bgpStates();
      expect([...states.keys()]).toEqual(['b1']);
      // no neighbour answers in this namespace: BIRD tries (Connect, Active) or waits (Idle)
      expect(states.get('b1')).toMatch(/^(Idle|Connect|Active)$/);
      await withBgp.stop();
      await expect(own.bgpStates()).rejects.toThrow(/BIRD control socket/);
    } finally {
      own.close();
    }
  });

  it('configure: BIRD’s verdict; a refused config is an error carrying BIRD’s message', async () => {
    expect(await control.configure()).toMatch(/Reconfigured/);
    await writeFile(bird.configPath, `${CONFIG}protocol bgp broken { garbage }\n`);
    const err = await control.configure().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BirdError);
    expect((err as BirdError).code).toBeGreaterThanOrEqual(8000);
    expect((err as Error).message).toMatch(/bird\.conf:4:\d+ syntax error/);
    await writeFile(bird.configPath, CONFIG);
    expect(await control.configure()).toMatch(/Reconfigured/);
  });

  it('runs commands in parallel on up to poolSizeMax connections', async () => {
    const replies = await Promise.all(Array.from({ length: 10 }, () => control.command('show status')));
    expect(replies.every((r) => r.code === 13)).toBe(true);
  });

  it('commands queued for a full pool settle when BIRD dies under them; the next BIRD answers', async () => {
    const single = new BirdControl(bird.socket, { poolSize: 1, poolSizeMax: 1 });
    try {
      expect(await single.ping()).toBe(true);
      const pid = Number((await readFile(join(bird.dir, 'bird.pid'), 'utf8')).trim());
      // BIRD frozen: the first command waits on the pool's only connection, the others queue for it
      process.kill(pid, 'SIGSTOP');
      const settled = Array.from({ length: 3 }, () =>
        single.command('show status').then(
          () => 'answered',
          () => 'failed',
        ),
      );
      await new Promise((r) => setTimeout(r, 200));
      process.kill(pid, 'SIGKILL');
      const outcome = await Promise.race([
        Promise.all(settled),
        new Promise((r) => setTimeout(() => r('still waiting after 10 s'), 10_000)),
      ]);
      expect(outcome).toEqual(['failed', 'failed', 'failed']);
      await bird.stop();
      bird = await lab.startBird(ns, { configPath: bird.configPath, socket: bird.socket });
      expect(await single.ping()).toBe(true);
    } finally {
      single.close();
    }
  });

  it('reconnects after BIRD restarts', async () => {
    await bird.stop();
    expect(await control.ping()).toBe(false);
    bird = await lab.startBird(ns, { configPath: bird.configPath, socket: bird.socket });
    expect(await control.ping()).toBe(true);
  });
});
