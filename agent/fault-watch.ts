/**
 * Notices faults between passes and says so at once (docs/agent.md, "When something is wrong"): every
 * FAULT_WATCH_MS it asks BIRD for its BGP protocols' states (`show protocols`, one line each). BIRD
 * refusing or not answering, or coming back, is a change of the router's condition (the agent sends a
 * heartbeat now); a BGP session that went up or down since the last pass judged it (phase below), or a
 * tunnel whose last handshake passes WireGuard's reject time, needs a pass to
 * judge the sessions (the agent runs one now). Without it a dead BIRD or a lost peer showed at the next
 * long poll's end, up to a minute later, and a dead tunnel after BGP's hold time.
 */
import type { Logger } from 'pino';
import type { BirdControl } from './bird/control.ts';

/** How often BIRD is asked: a fault reaches the controller within this and a round trip. */
export const FAULT_WATCH_MS = 2000;

/**
 * Whether BGP is up, by BIRD's state. BIRD moving between its states of trying (Idle, Connect, Active,
 * OpenSent, OpenConfirm) is its connect retry at work, which the next regular pass reports; only a move
 * into or out of Established, or a protocol gone, needs a pass now. A pass at each retry wrote the
 * session's status every few seconds for as long as its peer stayed away.
 */
function phase(state: string | undefined): 'up' | 'trying' | 'gone' {
  return state === 'Established' ? 'up' : state ? 'trying' : 'gone';
}

export interface FaultWatchEvents {
  /** BIRD stopped or started answering; `reason` is why not (undefined: it answers). */
  birdChanged(reason: string | undefined): void;
  /** Something a pass judges changed: a BGP state, a handshake grown too old. */
  passNeeded(why: string): void;
}

/** The last pass's view, read at each look (NodeReconciler). */
export interface JudgedState {
  /** Protocol name → the BGP state the last pass judged its session by. */
  bgp(): ReadonlyMap<string, string>;
  /** When the first running session's last handshake passes WireGuard's reject time (epoch ms). */
  handshakeDeadline(): number | undefined;
}

export class FaultWatch {
  private readonly bird: Pick<BirdControl, 'bgpStates'>;
  private readonly events: FaultWatchEvents;
  private readonly log: Logger;
  /** What the last pass saw: each session protocol's BGP state, when the first handshake grows too old. */
  private readonly judged: JudgedState;
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  /** The mismatch a pass was last asked for: asked once, not every look until the pass has run. */
  private askedFor = '';
  private judgedSeen: ReadonlyMap<string, string> | undefined;
  /** Why BIRD does not answer; undefined while it does, or before the first look. */
  private down: string | undefined;
  private looked = false;
  private deadlineWoken: number | undefined;

  constructor(
    bird: Pick<BirdControl, 'bgpStates'>,
    judged: JudgedState,
    events: FaultWatchEvents,
    log: Logger,
  ) {
    this.bird = bird;
    this.judged = judged;
    this.events = events;
    this.log = log;
  }

  /** Why BIRD did not answer at the last look; undefined when it did (or before the first). */
  get birdDown(): string | undefined {
    return this.down;
  }

  /** Whether BIRD has been looked at yet. */
  get known(): boolean {
    return this.looked;
  }

  start(): void {
    this.stopped = false;
    void this.tick();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** One look; the next is scheduled after it ends (a BIRD that hangs is not asked twice at once). */
  private async tick(now = Date.now()): Promise<void> {
    try {
      await this.look(now);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'fault watch: a look failed; looking again');
    } finally {
      if (!this.stopped) this.timer = setTimeout(() => void this.tick(), FAULT_WATCH_MS);
    }
  }

  private async look(now: number): Promise<void> {
    let states: Map<string, string> | undefined;
    let reason: string | undefined;
    try {
      states = await this.bird.bgpStates();
    } catch (err) {
      reason = (err as Error).message;
    }
    if (this.stopped) return;
    if (!this.looked || reason !== this.down) {
      const changed = this.looked && (reason === undefined) !== (this.down === undefined);
      this.down = reason;
      this.looked = true;
      if (changed) {
        if (reason) this.log.warn({ err: reason }, 'BIRD does not answer; telling the controller now');
        else this.log.info('BIRD answers again; telling the controller now');
        this.events.birdChanged(reason);
      }
    }
    if (states) {
      const judged = this.judged.bgp();
      // a pass ran since the last ask (each pass judges into a new map): ask again for what still differs
      if (judged !== this.judgedSeen) this.askedFor = '';
      this.judgedSeen = judged;
      const moved = [...judged].filter(([name, state]) => phase(states.get(name)) !== phase(state));
      const key = moved.map(([name]) => `${name}=${states.get(name) ?? ''}`).join();
      if (key !== this.askedFor) {
        this.askedFor = key;
        const [first] = moved;
        if (first) this.events.passNeeded(`BGP ${first[0]} is ${states.get(first[0]) || 'down'}`);
      }
    }
    const deadline = this.judged.handshakeDeadline();
    if (deadline !== undefined && now > deadline && deadline !== this.deadlineWoken) {
      this.deadlineWoken = deadline;
      this.events.passNeeded('a tunnel has had no handshake for longer than WireGuard accepts');
    }
  }
}
