/**
 * The serialized commit queue: one write to a repository at a time, each after every earlier one, a
 * failure not stopping the next (docs/store.md, "Layout").
 */
export class WriteQueue {
  private tail: Promise<unknown> = Promise.resolve();

  /** Run fn after every earlier write; one at a time. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => {});
    return run;
  }

  /** Wait for queued writes. */
  async drain(): Promise<void> {
    await this.tail.catch(() => {});
  }
}
