/**
 * Notices links deleted behind the agent's back: a peerops-wireguard host or a wireguard-go daemon that
 * crashed (the kernel deletes a TUN link with its process), or an operator's `ip link del`. Without it a
 * lost tunnel came back only at the next pass, up to `syncInterval` later (60 s by default), its BGP
 * session down all that time; the agent now runs a pass right after the loss (docs/agent.md, "When
 * something is wrong").
 *
 * It reads `ip -o monitor link` (one line per event; a deletion is `Deleted <index>: <name>[@…]: …`) in
 * the namespace of the agent's commands, gathers the deletions of a burst (a host's crash deletes every
 * tunnel at once) and hands their names over once. The monitor is started again if it exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { wrap } from '../system/exec.ts';

/** How long deletions are gathered before they are handed over: a crash's burst arrives within it. */
export const LOST_LINKS_SETTLE_MS = 300;
/** The wait before `ip monitor` is started again after it exited, doubled up to RESTART_MAX_MS. */
const RESTART_MIN_MS = 1000;
const RESTART_MAX_MS = 30_000;

const DELETED = /^Deleted \d+: ([^:@\s]+)[@:]/;

/** The link name of an `ip -o monitor link` line that tells of a deletion, else undefined. */
export function deletedLink(line: string): string | undefined {
  return DELETED.exec(line)?.[1];
}

export class LinkWatch {
  private readonly onDeleted: (names: string[]) => void;
  private readonly log: Logger;
  private child: ChildProcess | undefined;
  private stopped = false;
  private restartMs = RESTART_MIN_MS;
  private restartTimer: NodeJS.Timeout | undefined;
  private gathered = new Set<string>();
  private settleTimer: NodeJS.Timeout | undefined;

  constructor(onDeleted: (names: string[]) => void, log: Logger) {
    this.onDeleted = onDeleted;
    this.log = log;
  }

  start(): void {
    const [file, argv] = wrap('ip', ['-o', 'monitor', 'link']);
    const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'ignore'] });
    this.child = child;
    child.on('error', (err) => this.log.warn({ err: err.message }, 'link monitor (ip monitor) failed'));
    createInterface({ input: child.stdout }).on('line', (line) => {
      // a monitor that reports is a working one: the next exit waits the shortest time again
      this.restartMs = RESTART_MIN_MS;
      const name = deletedLink(line);
      if (name !== undefined) this.gather(name);
    });
    child.on('close', () => {
      if (this.stopped) return;
      this.log.warn({ retryInMs: this.restartMs }, 'link monitor (ip monitor) exited; starting it again');
      this.restartTimer = setTimeout(() => this.start(), this.restartMs);
      this.restartMs = Math.min(RESTART_MAX_MS, this.restartMs * 2);
    });
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    clearTimeout(this.settleTimer);
    this.child?.kill();
  }

  private gather(name: string): void {
    this.gathered.add(name);
    this.settleTimer ??= setTimeout(() => {
      const names = [...this.gathered];
      this.gathered = new Set();
      this.settleTimer = undefined;
      this.onDeleted(names);
    }, LOST_LINKS_SETTLE_MS);
  }
}
