/**
 * The manifests a store skips (docs/store.md, "What the store refuses"), kept by each back end: the git
 * store's files it cannot apply, the Kubernetes store's objects it cannot index. One gauge by reason and
 * one time of the last change between "skips some" and "skips none", for GET /admin/store.
 */
import type { RefusalReason } from '../../../common/manifests.ts';
import { gauge } from '../../metrics.ts';
import type { SkippedManifest } from '../store.ts';

/**
 * Why a manifest is skipped: its file refused by parseManifest, the rules across manifests, or a blob or
 * object that could not be read.
 */
export type SkipReason = RefusalReason | 'rules' | 'unreadable';

const SKIP_REASONS: readonly SkipReason[] = [
  'too_large',
  'too_deep',
  'anchors',
  'yaml',
  'layout',
  'schema',
  'rules',
  'unreadable',
];

const skippedGauge = gauge({
  name: 'peerops_store_manifests_skipped',
  help: 'Manifests the store skips now, by reason (docs/store.md, "What the store refuses")',
  labelNames: ['reason'],
});

export class SkipReport {
  private skipping = false;
  /** When the store last began or stopped skipping manifests. */
  private since = new Date().toISOString();

  /** The gauge and the transition time follow the manifests skipped now. */
  update(skipped: Iterable<{ reason: SkipReason }>): void {
    const counts = new Map<SkipReason, number>(SKIP_REASONS.map((r) => [r, 0]));
    for (const s of skipped) counts.set(s.reason, (counts.get(s.reason) ?? 0) + 1);
    let total = 0;
    for (const [reason, n] of counts) {
      skippedGauge.set({ reason }, n);
      total += n;
    }
    if (this.skipping !== total > 0) {
      this.skipping = total > 0;
      this.since = new Date().toISOString();
    }
  }

  /** The answer of Store.skippedManifests, for these manifests (sorted by path). */
  report(manifests: SkippedManifest[]): { manifests: SkippedManifest[]; since: string } {
    return {
      manifests: manifests.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)),
      since: this.since,
    };
  }
}
