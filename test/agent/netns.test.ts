import { afterAll, describe, expect, it } from 'vitest';
import { NetnsLab } from '../support/netns.ts';

const lab = new NetnsLab('ag');
afterAll(() => lab.cleanup());

describe('netns lab', () => {
  it('creates namespaces joined by a veth, runs BIRD inside, and cleans up', async () => {
    const a = await lab.namespace('a');
    const b = await lab.namespace('b');
    await lab.veth(a, b, { a: 'fd00:99::1/64', b: 'fd00:99::2/64' });
    const ping = await a.exec('ping', ['-6', '-c', '1', '-W', '2', 'fd00:99::2']);
    expect(ping.code).toBe(0);
    const bird = await lab.startBird(b, 'router id 10.0.0.2;\nprotocol device {}\n');
    expect(await bird.birdc('show status')).toContain('Daemon is up');
    const port = lab.uniquePort();
    await a.run('wireguard-go', [`wg_${port}`]);
    expect(await a.run('ip', ['-j', 'link', 'show', `wg_${port}`])).toContain(`wg_${port}`);
    const name = a.name;
    await lab.cleanup();
    const list = await import('node:child_process').then((cp) =>
      cp.execFileSync('ip', ['netns', 'list']).toString(),
    );
    expect(list).not.toContain(name);
  });
});
