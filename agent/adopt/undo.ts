/**
 * `peerops adopt --undo` (docs/agent.md, Adopting a running router): every hand-made file the takeover
 * set aside goes back from the record (byte for byte: it was renamed, never rewritten), the agent's
 * files for the adopted sessions and for the protocols left running (remainder.ts) go, and BIRD is configured once on the result. The hand-made protocols
 * come back with the options the agent rendered them with, so BIRD keeps every session; the links are
 * left as they run. Run with the agent stopped, or its next pass takes the sessions over again.
 */
import { rename, rm, stat } from 'node:fs/promises';
import { get } from 'node:http';
import { join } from 'node:path';
import { BirdControl } from '../bird/control.ts';
import { parseListen, type AgentConfig } from '../config.ts';
import { run } from '../system/exec.ts';
import { REMAINDER_FILE } from './remainder.ts';
import { adoptionDir, loadRecord } from './takeover.ts';

export interface UndoResult {
  restored: string[];
  removed: string[];
  /** BIRD's answer to the configure, or why it failed. */
  bird: string;
  ok: boolean;
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  );

/**
 * Where the agent answers on its health port (`server.listen`), if it runs: an undo beside a running
 * agent would be taken over again by its next pass.
 */
export function runningAgent(config: AgentConfig): Promise<string | undefined> {
  const { host, port } = parseListen(config.server.listen);
  if (!port) return Promise.resolve(undefined);
  const target = host && host !== '0.0.0.0' && host !== '::' ? host : '127.0.0.1';
  const where = `${target.includes(':') ? `[${target}]` : target}:${port}`;
  return new Promise((resolve) => {
    const req = get({ host: target, port, path: '/livez', timeout: 2000 }, (res) => {
      res.resume();
      resolve(where);
    });
    req.on('error', () => resolve(undefined));
    req.on('timeout', () => req.destroy());
  });
}

export async function undoAdoption(config: AgentConfig): Promise<UndoResult> {
  const dir = adoptionDir(config.tunnel.configDir);
  const record = await loadRecord(dir);
  const restored: string[] = [];
  const removed: string[] = [];
  for (const m of [...record.setAside].reverse()) {
    if (!(await exists(m.to))) continue;
    await rename(m.to, m.from);
    restored.push(m.from);
  }
  const agentFiles = [
    ...record.links.map((l) => l.peerFile),
    ...(record.remainder === undefined ? [] : [REMAINDER_FILE]),
  ];
  for (const name of agentFiles) {
    const file = join(config.routing.peerConfDir, name);
    if (await exists(file)) {
      await rm(file);
      removed.push(file);
    }
  }
  let bird: string;
  let ok = true;
  const control = new BirdControl(config.routing.controlSocket);
  try {
    bird = (await control.configure()).trim() || 'Reconfigured';
  } catch (err) {
    bird = (err as Error).message;
    ok = false;
  } finally {
    control.close();
  }
  // the links are hand-made again: the agent's generation stamp goes with the record
  for (const link of record.links) await run('ip', ['link', 'set', 'dev', link.interface, 'alias', '']);
  if (ok) await rm(dir, { recursive: true, force: true });
  return { restored, removed, bird, ok };
}
