/**
 * The other routers as the agents' peer lists show them (docs/api.md, Agent API): `ibgpPeers` of
 * `GET /agent/:router/bird-config` and `/config`, `peers` of `/mesh` and `meshPeers` of `/config`. Each
 * lists every other router, so at a thousand routers an answer is some 200 KiB, and the agents ask for them
 * all at once when they start. So each router's entry is encoded once, the entries are joined once into
 * the whole list, and an answer is that list's bytes less the asker's own entry: two copies, not an
 * object build and a JSON encoding per request.
 *
 * The lists are joined again after a change of a router they show: the store tells every change of a
 * router's spec, its coming and going, and a change of its mesh key (the one status field shown) as a
 * Router event (docs/store.md); heartbeats that change nothing shown tell none. Then only the changed
 * routers' entries are encoded again: the store's routers are frozen and a change of a spec replaces it,
 * so an entry is kept per spec object (and its mesh key compared). The entries show the same to every
 * asker but for the mesh endpoint's port, which is the asker's (meshListenPort of its nodeId): the joined
 * mesh list has a hole for it in every entry, filled per answer.
 */
import type { IbgpPeer, MeshPeer } from '../../common/agent-api.ts';
import { formatEndpoint } from '../../common/net.ts';
import { meshListenPort } from '../../common/naming.ts';
import type { RouterSpec } from '../../common/schema.ts';
import type { Router, Store } from '../store/store.ts';

/** Encoded JSON and its length in bytes. */
interface Text {
  json: string;
  bytes: number;
}

/** A router's entry in a list: encoded parts with a hole for the asker's port between each two. */
interface Entry {
  name: string;
  parts: readonly Text[];
}

const text = (json: string): Text => ({ json, bytes: Buffer.byteLength(json) });

interface Entries {
  name: string;
  meshPublicKey: string | undefined;
  ibgp: Entry;
  /** Absent without a mesh key: such a router is no mesh peer. */
  mesh: Entry | undefined;
}

/** Entries joined into one JSON array, the holes filled with `width` zeros. */
interface Joined {
  /** What it joined: it stays current while they do. */
  entries: readonly Entry[];
  body: Buffer;
  /** Each entry's index by router name. */
  index: Map<string, number>;
  /** Where each entry starts and ends in `body`. */
  starts: number[];
  ends: number[];
  /** Where each hole is in `body`, ascending. */
  holes: number[];
}

const loopbackOf = (spec: RouterSpec): IbgpPeer['loopback'] => ({
  ipv4: spec.loopback.ipv4,
  ipv6: spec.loopback.ipv6,
});

function join(entries: readonly Entry[], width: number): Joined {
  const hole = '0'.repeat(width);
  const texts = ['['];
  const starts: number[] = [];
  const ends: number[] = [];
  const holes: number[] = [];
  let at = 1;
  entries.forEach((entry, i) => {
    if (i > 0) {
      texts.push(',');
      at += 1;
    }
    starts.push(at);
    entry.parts.forEach((part, p) => {
      if (p > 0) {
        holes.push(at);
        texts.push(hole);
        at += width;
      }
      texts.push(part.json);
      at += part.bytes;
    });
    ends.push(at);
  });
  texts.push(']');
  const index = new Map(entries.map((entry, i) => [entry.name, i]));
  return { entries, body: Buffer.from(texts.join('')), index, starts, ends, holes };
}

/** `joined`'s bytes without the entry of router `self`, the holes filled with `port`. */
function answer(joined: Joined, self: string, port: string): Buffer {
  const { body, starts, ends } = joined;
  const index = joined.index.get(self) ?? -1;
  const last = starts.length - 1;
  // the entry and the comma after it (or, the last one, before it)
  const [cutStart, cutEnd] =
    index < 0
      ? [body.length, body.length]
      : index < last
        ? [starts[index] as number, starts[index + 1] as number]
        : [index > 0 ? (ends[index - 1] as number) : (starts[index] as number), ends[index] as number];
  const cut = cutEnd - cutStart;
  const out = Buffer.allocUnsafe(body.length - cut);
  body.copy(out, 0, 0, cutStart);
  body.copy(out, cutStart, cutEnd);
  if (joined.holes.length > 0) {
    const digits = Buffer.from(port);
    for (const hole of joined.holes) {
      if (hole >= cutStart && hole < cutEnd) continue;
      const to = hole < cutStart ? hole : hole - cut;
      for (let d = 0; d < digits.length; d++) out[to + d] = digits[d] as number;
    }
  }
  return out;
}

/** The encoded peer lists, from the store's routers. */
export class PeerLists {
  /** Entries built so far: each router's once per change of what they show (tests count them). */
  builds = 0;
  private readonly entries = new WeakMap<RouterSpec, Entries>();
  /** The routers' entries in the store's order; undefined after a change of a router. */
  private current: Entries[] | undefined;
  private ibgpList: Joined | undefined;
  /** The last iBGP list, current or not. */
  private lastIbgpList: Joined | undefined;
  /** By the number of digits of the port. */
  private readonly meshLists = new Map<number, Joined>();
  private readonly store: Store;
  readonly close: () => void;

  constructor(store: Store) {
    this.store = store;
    this.close = store.onChange((event) => {
      if (event.kind !== 'Router') return;
      this.current = undefined;
      this.ibgpList = undefined;
      this.meshLists.clear();
    });
  }

  /** `ibgpPeers` of the router `self`, as a JSON array: every other router. */
  ibgp(self: string): Buffer {
    if (!this.ibgpList) {
      const entries = this.routers().map((e) => e.ibgp);
      // a mesh key changed: the iBGP list shows none
      this.ibgpList =
        this.lastIbgpList && same(this.lastIbgpList.entries, entries) ? this.lastIbgpList : join(entries, 0);
      this.lastIbgpList = this.ibgpList;
    }
    return answer(this.ibgpList, self, '');
  }

  /** The mesh peers of `self` as a JSON array: every other router with a mesh key. */
  mesh(self: Router): Buffer {
    const port = String(meshListenPort(self.spec.nodeId));
    let list = this.meshLists.get(port.length);
    if (!list) {
      list = join(
        this.routers().flatMap((e) => e.mesh ?? []),
        port.length,
      );
      this.meshLists.set(port.length, list);
    }
    return answer(list, self.name, port);
  }

  private routers(): Entries[] {
    this.current ??= this.store.listRouters().map((r) => this.entriesOf(r));
    return this.current;
  }

  private entriesOf(router: Router): Entries {
    const { name, spec } = router;
    const meshPublicKey = router.status.meshPublicKey || undefined;
    const kept = this.entries.get(spec);
    if (kept && kept.name === name && kept.meshPublicKey === meshPublicKey) return kept;
    this.builds++;
    const ibgp: IbgpPeer = { router: name, nodeId: spec.nodeId, loopback: loopbackOf(spec) };
    const made: Entries = {
      name,
      meshPublicKey,
      ibgp: { name, parts: [text(JSON.stringify(ibgp))] },
      mesh: undefined,
    };
    if (meshPublicKey !== undefined) {
      const peer: MeshPeer = {
        router: name,
        nodeId: spec.nodeId,
        endpoint: formatEndpoint({ host: spec.endpointHost, port: 0 }),
        publicKey: meshPublicKey,
        linkLocal: spec.linkLocal,
        loopback: loopbackOf(spec),
        listenPort: meshListenPort(spec.nodeId),
      };
      // the placeholder port 0 cut out: `…"endpoint":"host:` and `","publicKey":…}`
      const json = JSON.stringify(peer);
      const at = json.indexOf(',"publicKey":') - 2;
      made.mesh = { name, parts: [text(json.slice(0, at)), text(json.slice(at + 1))] };
    }
    this.entries.set(spec, made);
    return made;
  }
}

function same(a: readonly Entry[], b: readonly Entry[]): boolean {
  return a.length === b.length && a.every((entry, i) => entry === b[i]);
}
