/**
 * Values by key, where most keys have one value: that value is held as it is, a Set only for two or more
 * (at 100,000 sessions a Set per key was 300,000 Sets, a tenth of a start's indexing).
 */
export class MultiMap<K, V> {
  private readonly map = new Map<K, V | Set<V>>();

  add(key: K, value: V): void {
    const held = this.map.get(key);
    if (held === undefined) this.map.set(key, value);
    else if (held instanceof Set) held.add(value);
    else if (held !== value) this.map.set(key, new Set([held, value]));
  }

  delete(key: K, value: V): void {
    const held = this.map.get(key);
    if (!(held instanceof Set)) {
      if (held === value) this.map.delete(key);
    } else if (held.delete(value) && held.size === 1) this.map.set(key, held.values().next().value as V);
  }

  has(key: K): boolean {
    return this.map.has(key);
  }

  /** The values of `key`, none when it has none (no generator: a start asks for a few per session). */
  get(key: K): Iterable<V> {
    const held = this.map.get(key);
    return held instanceof Set ? held : held === undefined ? [] : [held];
  }
}
