/**
 * A real Prometheus (/usr/bin/prometheus) on loopback scraping the given ports' /metrics every second,
 * its data in `dir`: for the tests of `--history-prometheus` (docs/kubernetes.md, Session history).
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort } from './ports.ts';

export interface TestPrometheus {
  url: string;
  stop(): Promise<void>;
}

export async function startPrometheus(dir: string, targetPorts: number[]): Promise<TestPrometheus> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  await writeFile(
    join(dir, 'prometheus.yml'),
    [
      'global: { scrape_interval: 1s, evaluation_interval: 1s }',
      'scrape_configs:',
      '  - job_name: peerops',
      `    static_configs: [{ targets: [${targetPorts.map((p) => `"127.0.0.1:${p}"`).join(', ')}] }]`,
      '',
    ].join('\n'),
  );
  const child = spawn(
    '/usr/bin/prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise((r) => child.once('exit', r));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  // a deadline loop (this runs before a test, where expect.poll does not) until Prometheus is ready
  const deadline = Date.now() + 30_000;
  while ((await fetch(`${url}/-/ready`).catch(() => undefined))?.status !== 200) {
    if (Date.now() > deadline || child.exitCode !== null) {
      await stop();
      throw new Error('prometheus did not start');
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { url, stop };
}
