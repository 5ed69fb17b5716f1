/**
 * What a button or a form does on the server, as every page runs it: the last problem cleared, busy
 * while it runs (its button disabled, a loading line shown), and what it threw kept for the page to show
 * (components.tsx, Problem; an ApiError's fields at their inputs).
 */
import { useState } from 'preact/hooks';

export interface Action {
  busy: boolean;
  error: unknown;
  /** Runs `action`: the error cleared first, busy until it ends, its throw kept as `error`. */
  run: (action: () => Promise<void>) => Promise<void>;
}

export function useAction(): Action {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const run = async (action: () => Promise<void>) => {
    setError(undefined);
    setBusy(true);
    try {
      await action();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run };
}
