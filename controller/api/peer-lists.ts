/**
 * The other routers as the agents' peer lists show them (docs/api.md, Agent API): `ibgpPeers` of
 * `GET /agent/:router/bird-config` and `/config`, `peers` of `/mesh` and `meshPeers` of `/config`. Each
 * lists every other router, so at a thousand routers an answer is some 200 KiB, and the agents ask for them
 * all at once when they start. So each router's entry is encoded once, the entries are joined in blocks
 * of BLOCK routers, and an answer is a copy of the blocks less the asker's own entry, not an object
 * build and a JSON encoding per request.
 *
 * A block is joined again after a change of one of its routers: the store tells every change of a
 * router's spec, its coming and going, and a change of its mesh key (the one status field shown) as a
 * Router event; heartbeats that change nothing shown tell none. When agents start at once, each with a
 * new mesh key, each key so costs one block, not the whole list. A router coming or going moves the
 * others: every block is joined again. Only changed routers' entries are encoded again: the store's
 * routers are frozen and a change of a spec replaces it, so an entry is kept per spec object (and its
 * mesh key compared). The entries show the same to every asker but for the mesh endpoint's port, which
 * is the asker's (meshListenPort of its nodeId): a mesh entry has a hole for it, filled per answer.
 *
 * Agents ask for their lists on every pass with the ETag of the last answer. The tag is a hash of what an
 * answer is made of (the text around the list, the asker, its port, each block's hash), so an unchanged
 * list is answered 304 without copying it, and the same content has the same tag on every replica.
 */
import { hash } from 'node:crypto';
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

/** Routers per block: a change joins this many entries again; an answer copies routers / BLOCK blocks. */
const BLOCK = 32;

/** Entries joined with commas (no brackets), the holes filled with zeros. */
interface Block {
  body: Buffer;
  /** Each entry's index by router name. */
  index: Map<string, number>;
  /** Where each entry starts and ends in `body`. */
  starts: number[];
  ends: number[];
  /** Where each hole is in `body`, ascending. */
  holes: number[];
  /** A hash of `body`: what an answer's tag is made of (PeerLists, tags). */
  hash: string;
}

function join(entries: readonly Entry[], width: number): Block {
  const hole = '0'.repeat(width);
  const texts: string[] = [];
  const starts: number[] = [];
  const ends: number[] = [];
  const holes: number[] = [];
  let at = 0;
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
  const index = new Map(entries.map((entry, i) => [entry.name, i]));
  const body = Buffer.from(texts.join(''));
  return { body, index, starts, ends, holes, hash: hash('sha256', body, 'base64url') };
}

/** The bytes of `block` to cut to leave out the entry of `self`: the entry and a comma beside it. */
function cutOf(block: Block, self: string): [start: number, end: number] {
  const { body, starts, ends } = block;
  const index = block.index.get(self);
  if (index === undefined) return [body.length, body.length];
  if (index < starts.length - 1) return [starts[index] as number, starts[index + 1] as number];
  return [index > 0 ? (ends[index - 1] as number) : 0, body.length];
}

/** A list in blocks of routers (in the store's order), each joined when first needed after a change. */
class BlockList {
  private blocks: (Block | undefined)[] = [];
  private readonly width: number;
  private readonly entryOf: (entries: Entries) => Entry | undefined;

  constructor(width: number, entryOf: (entries: Entries) => Entry | undefined) {
    this.width = width;
    this.entryOf = entryOf;
  }

  changed(block?: number): void {
    if (block === undefined) this.blocks = [];
    else this.blocks[block] = undefined;
  }

  private block(b: number, routers: (block: number) => Entries[]): Block {
    return (this.blocks[b] ??= join(
      routers(b).flatMap((e) => this.entryOf(e) ?? []),
      this.width,
    ));
  }

  /**
   * The strong ETag of `answer` with the same arguments, without making it: a hash of everything the
   * answer is made of (the text around it, the asker and its port, each block's hash). Equal tags mean
   * equal answers, on any replica of the same release.
   */
  tag(
    routers: (block: number) => Entries[],
    blocks: number,
    self: string,
    port: string,
    around: Around,
  ): string {
    const parts = [around[0], around[1], self, port];
    for (let b = 0; b < blocks; b++) parts.push(this.block(b, routers).hash);
    return `"${hash('sha256', JSON.stringify(parts), 'base64url').slice(0, 27)}"`;
  }

  /**
   * The list as a JSON array without the entry of `self`, the holes filled with `port`, between the bytes
   * of `around` (what an answer has before and after it).
   */
  answer(
    routers: (block: number) => Entries[],
    blocks: number,
    self: string,
    port: string,
    around: Around,
  ): Buffer {
    const before = Buffer.from(around[0]);
    const after = Buffer.from(around[1]);
    const parts: { block: Block; cut: [number, number]; bytes: number }[] = [];
    let size = before.length + 2 + after.length;
    for (let b = 0; b < blocks; b++) {
      const block = this.block(b, routers);
      const cut = cutOf(block, self);
      const bytes = block.body.length - (cut[1] - cut[0]);
      if (bytes === 0) continue;
      size += bytes + (parts.length > 0 ? 1 : 0);
      parts.push({ block, cut, bytes });
    }
    const out = Buffer.allocUnsafe(size);
    const digits = Buffer.from(port);
    let at = before.copy(out);
    out[at++] = 0x5b; // [
    for (const [i, { block, cut, bytes }] of parts.entries()) {
      if (i > 0) out[at++] = 0x2c; // ,
      const [cutStart, cutEnd] = cut;
      block.body.copy(out, at, 0, cutStart);
      block.body.copy(out, at + cutStart, cutEnd);
      for (const hole of block.holes) {
        if (hole >= cutStart && hole < cutEnd) continue;
        const to = at + (hole < cutStart ? hole : hole - (cutEnd - cutStart));
        for (let d = 0; d < digits.length; d++) out[to + d] = digits[d] as number;
      }
      at += bytes;
    }
    out[at++] = 0x5d; // ]
    after.copy(out, at);
    return out;
  }
}

/** The text before and after a list in an answer: `{"peers":` and `}`. */
export type Around = readonly [before: string, after: string];

const loopbackOf = (spec: RouterSpec): IbgpPeer['loopback'] => ({
  ipv4: spec.loopback.ipv4,
  ipv6: spec.loopback.ipv6,
});

/** The encoded peer lists, from the store's routers. */
export class PeerLists {
  /** Entries built so far: each router's once per change of what they show (tests count them). */
  builds = 0;
  private readonly entries = new WeakMap<RouterSpec, Entries>();
  /** The routers' names in the store's order, and their places; undefined after one came or went. */
  private order: { names: string[]; places: Map<string, number> } | undefined;
  private readonly ibgpList = new BlockList(0, (e) => e.ibgp);
  /** By the number of digits of the port. */
  private readonly meshLists = new Map<number, BlockList>();
  private readonly store: Store;
  private readonly blockSize: number;
  readonly close: () => void;

  /** `blockSize`: routers per block (BLOCK; tests take fewer to have several blocks). */
  constructor(store: Store, blockSize = BLOCK) {
    this.store = store;
    this.blockSize = blockSize;
    this.close = store.onChange((event) => {
      if (event.kind !== 'Router') return;
      const place = event.type === 'put' ? this.order?.places.get(event.name) : undefined;
      if (place === undefined) this.order = undefined;
      const block = place === undefined ? undefined : Math.floor(place / this.blockSize);
      this.ibgpList.changed(block);
      for (const list of this.meshLists.values()) list.changed(block);
    });
  }

  /** `ibgpPeers` of the router `self`, as a JSON array (every other router) between `around`. */
  ibgp(self: string, around: Around = ['', '']): Buffer {
    return this.ibgpList.answer(...this.blocks(), self, '', around);
  }

  /** The mesh peers of `self`, as a JSON array (every other router with a mesh key) between `around`. */
  mesh(self: Router, around: Around = ['', '']): Buffer {
    const { list, port } = this.meshList(self);
    return list.answer(...this.blocks(), self.name, port, around);
  }

  /** The ETag of what `ibgp` answers with the same arguments, without making the answer. */
  ibgpTag(self: string, around: Around = ['', '']): string {
    return this.ibgpList.tag(...this.blocks(), self, '', around);
  }

  /** The ETag of what `mesh` answers with the same arguments, without making the answer. */
  meshTag(self: Router, around: Around = ['', '']): string {
    const { list, port } = this.meshList(self);
    return list.tag(...this.blocks(), self.name, port, around);
  }

  /** The mesh list for the asker's port (its holes are as wide as the port's digits). */
  private meshList(self: Router): { list: BlockList; port: string } {
    const port = String(meshListenPort(self.spec.nodeId));
    let list = this.meshLists.get(port.length);
    if (!list) this.meshLists.set(port.length, (list = new BlockList(port.length, (e) => e.mesh)));
    return { list, port };
  }

  /** The routers of each block, in the store's order, and how many blocks there are. */
  private blocks(): [routers: (block: number) => Entries[], blocks: number] {
    if (!this.order) {
      const names = this.store.listRouters().map((r) => r.name);
      this.order = { names, places: new Map(names.map((name, i) => [name, i])) };
      this.ibgpList.changed();
      for (const mesh of this.meshLists.values()) mesh.changed();
    }
    const { names } = this.order;
    const size = this.blockSize;
    const routers = (block: number) =>
      names.slice(block * size, (block + 1) * size).flatMap((name) => {
        const router = this.store.getRouter(name);
        return router ? [this.entriesOf(router)] : [];
      });
    return [routers, Math.ceil(names.length / size)];
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
