/** A long poll answered sooner than this without a change was not held. */
const HELD_MS = 500;
/** Long polls not held, in a row, after which the agent stops long polling. */
const NOT_HELD_IN_A_ROW = 3;

/**
 * Does the controller hold long polls? One that does not (a proxy in front of it that answers at once)
 * answers every poll without waiting, and the agent then polls every syncInterval instead. A controller
 * that is stopping also answers the polls it holds at once, once, and the one that replaces it holds them
 * again: so only a few unheld answers in a row turn long polling off, never a single one (docs/agent.md).
 */
export class LongPollSupport {
  private notHeld = 0;
  /** Whether to go on long polling. */
  held = true;

  /**
   * After a long poll: whether it brought a change and how long it took. True when this answer turned long
   * polling off.
   */
  answered(changed: boolean, ms: number): boolean {
    if (!this.held) return false;
    this.notHeld = !changed && ms < HELD_MS ? this.notHeld + 1 : 0;
    if (this.notHeld < NOT_HELD_IN_A_ROW) return false;
    this.held = false;
    return true;
  }
}
