/**
 * What the index publishes when a back end puts what its storage holds (a router read back with another
 * replica's status, say): the topics of the answers it changes and no others.
 */
import { describe, expect, it } from 'vitest';
import { StoreIndex } from '../../controller/store/core/store-index.ts';
import { topics } from '../../controller/store/change-feed.ts';
import { routerSpec, wgKey } from './fixtures.ts';

describe('the index publishes by topic', () => {
  it('a router read back from storage: its spec to routers, a status (a mesh key) to nothing kept or waited on', () => {
    const index = new StoreIndex();
    const spec = routerSpec(1);
    const watched = [topics.routers, topics.routerSessions('fra1'), topics.policies, topics.allSessions];
    const revisions = () => Object.fromEntries(watched.map((t) => [t, index.feed.revision(t)]));
    const moved = (before: Record<string, number>) =>
      watched.filter((t) => index.feed.revision(t) !== before[t]);

    let before = revisions();
    index.putRouter('fra1', spec, {});
    expect(moved(before)).toEqual([topics.routers]);

    const key = wgKey();
    before = revisions();
    index.putRouter('fra1', { ...spec }, { meshPublicKey: key, uptime: 5 });
    expect(moved(before)).toEqual([]);

    before = revisions();
    index.putRouter('fra1', { ...spec }, { meshPublicKey: key, uptime: 6 });
    expect(moved(before)).toEqual([]);

    before = revisions();
    index.putRouter('fra1', { ...spec, displayName: 'Frankfurt' });
    expect(moved(before)).toEqual([topics.routers]);
  });
});
