/**
 * The hand-made files `peerops adopt` reads (docs/agent.md, Adopting a running router): wg-quick files,
 * systemd-networkd .netdev/.network pairs, and BIRD's include tree from bird.conf. Read-only.
 */
import { readdir, readFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';

/** One tunnel interface as its files define it; kind other than wireguard is reported, never adopted. */
export interface HandTunnel {
  interface: string;
  kind: string;
  file: string;
  listenPort?: number;
  publicKey?: string;
  endpoint?: string;
  mtu?: number;
  addresses: string[];
}

/** One `protocol bgp` of BIRD's configuration, with its template's fields filled in. */
export interface HandProtocol {
  name: string;
  file: string;
  neighbor: string;
  interface?: string;
  asn: number;
  channels: string[];
  extendedNextHop: boolean;
  /** The template it is defined `from`, if any. */
  from?: string;
  /** Its text between the braces, comments removed: what the takeover renders again (takeover-bird.ts). */
  body: string;
}

/** One `template bgp` of BIRD's configuration, as written. */
export interface HandTemplate {
  from?: string;
  body: string;
}

type Ini = { section: string; key: string; value: string }[];

function parseIni(text: string): Ini {
  const out: Ini = [];
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.replace(/[#;].*$/, '').trim();
    const head = /^\[(.+)\]$/.exec(line);
    if (head) section = head[1]!;
    else if (line.includes('=')) {
      const at = line.indexOf('=');
      out.push({ section, key: line.slice(0, at).trim().toLowerCase(), value: line.slice(at + 1).trim() });
    }
  }
  return out;
}

const field = (ini: Ini, section: string, key: string) =>
  ini.find((e) => e.section.toLowerCase() === section && e.key === key)?.value;
const fields = (ini: Ini, section: string, key: string) =>
  ini.filter((e) => e.section.toLowerCase() === section && e.key === key).flatMap((e) => e.value.split(','));

const toInt = (v: string | undefined) => (v === undefined ? undefined : Number.parseInt(v, 10));
const stripPrefix = (a: string) => a.trim().replace(/\/\d+$/, '');

async function listDir(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** wg-quick files: one interface per `<name>.conf`, its single [Peer] is the peer. */
export async function readWgQuick(dir: string): Promise<HandTunnel[]> {
  const tunnels: HandTunnel[] = [];
  for (const name of await listDir(dir)) {
    if (!name.endsWith('.conf')) continue;
    const file = join(dir, name);
    const ini = parseIni(await readFile(file, 'utf8'));
    tunnels.push({
      interface: basename(name, '.conf'),
      kind: 'wireguard',
      file,
      listenPort: toInt(field(ini, 'interface', 'listenport')),
      publicKey: field(ini, 'peer', 'publickey'),
      endpoint: field(ini, 'peer', 'endpoint'),
      mtu: toInt(field(ini, 'interface', 'mtu')),
      addresses: fields(ini, 'interface', 'address').map(stripPrefix),
    });
  }
  return tunnels;
}

/** systemd-networkd: a .netdev names the interface and its kind, the .network matching it its addresses. */
export async function readNetworkd(dir: string): Promise<HandTunnel[]> {
  const names = await listDir(dir);
  const networks = await Promise.all(
    names
      .filter((n) => n.endsWith('.network'))
      .map(async (n) => parseIni(await readFile(join(dir, n), 'utf8'))),
  );
  const tunnels: HandTunnel[] = [];
  for (const name of names) {
    if (!name.endsWith('.netdev')) continue;
    const file = join(dir, name);
    const ini = parseIni(await readFile(file, 'utf8'));
    const iface = field(ini, 'netdev', 'name');
    if (!iface) continue;
    const network = networks.find((n) => field(n, 'match', 'name') === iface) ?? [];
    tunnels.push({
      interface: iface,
      kind: (field(ini, 'netdev', 'kind') ?? 'unknown').toLowerCase(),
      file,
      listenPort: toInt(field(ini, 'wireguard', 'listenport')),
      publicKey: field(ini, 'wireguardpeer', 'publickey'),
      endpoint: field(ini, 'wireguardpeer', 'endpoint'),
      mtu: toInt(field(ini, 'netdev', 'mtubytes')),
      addresses: [...fields(network, 'network', 'address'), ...fields(network, 'address', 'address')].map(
        stripPrefix,
      ),
    });
  }
  return tunnels;
}

/** The first line of every BIRD file the agent renders (its main file, a session's): not hand-made. */
export const AGENT_FILE_HEAD = '# Rendered by peerops';
/** The first line of the file of hand-made protocols the agent keeps running unadopted (remainder.ts). */
export const REMAINDER_HEAD = '# Hand-made protocols kept by peerops';

export interface TreeOptions {
  /**
   * Read the hand-made tree as the operator wrote it (the takeover, takeover.ts): a file set aside as
   * `<file><suffix>` is read in its place, and the file of kept protocols is skipped.
   */
  setAsideSuffix?: string;
}

/** One file of BIRD's tree: its path as the include names it, its text without comments and includes. */
export interface BirdFile {
  file: string;
  text: string;
}

/**
 * BIRD's text without comments, each `include` replaced by the files it names (globs `*` in the name).
 * The agent's own files are followed for their includes but contribute nothing: their protocols are
 * sessions already (docs/agent.md, Taking the peers over).
 */
async function expandIncludes(
  file: string,
  seen: Set<string>,
  opts: TreeOptions,
  readFrom = file,
): Promise<BirdFile[]> {
  const path = resolve(file);
  if (seen.has(path)) return [];
  seen.add(path);
  const raw = await readFile(readFrom, 'utf8');
  const skipped = raw.startsWith(AGENT_FILE_HEAD) || (opts.setAsideSuffix && raw.startsWith(REMAINDER_HEAD));
  const text = raw.replace(/\/\*[\s\S]*?\*\//g, '').replace(/#.*$/gm, '');
  const parts: BirdFile[] = [];
  let rest = text;
  for (const m of text.matchAll(/include\s+"([^"]+)"\s*;/g)) {
    const target = resolve(dirname(path), m[1]!);
    const dir = dirname(target);
    const pattern = new RegExp(
      `^${basename(target)
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '.*')}$`,
    );
    const names = await listDir(dir);
    const suffix = opts.setAsideSuffix;
    for (const n of names) {
      if (pattern.test(n)) parts.push(...(await expandIncludes(join(dir, n), seen, opts)));
      else if (suffix && n.endsWith(suffix)) {
        // set aside by an earlier takeover: read where it is now, under the name BIRD knew it by
        const original = n.slice(0, -suffix.length);
        if (pattern.test(original) && !names.includes(original))
          parts.push(...(await expandIncludes(join(dir, original), seen, opts, join(dir, n))));
      }
    }
    rest = rest.replace(m[0], '');
  }
  return skipped ? parts : [{ file: path, text: rest }, ...parts];
}

/** The body between the brace at `open` and its match. */
function block(text: string, open: number): string {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) return text.slice(open + 1, i);
  }
  return text.slice(open + 1);
}

interface Body {
  neighbor?: string;
  interface?: string;
  asn?: number;
  channels: string[];
  extendedNextHop: boolean;
}

function readBody(body: string, base: Body | undefined): Body {
  // `fe80::1%wg0`, `fe80::1 % 'wg-0'` (peerops's own spelling): the scope kept as `%<name>`
  const m = /neighbor\s+([0-9a-fA-F:.]+)(?:\s*%\s*('[^']+'|[\w.-]+))?\s+as\s+(\d+)/.exec(body);
  const neighbor = m && [`${m[1]}${m[2] ? `%${m[2]}` : ''}`, m[3]!];
  const iface = /(?:^|[;{\s])interface\s+"([^"]+)"/.exec(body);
  // a channel closed by hand (`import none; export none;`, the DN42 wiki's IPv4/IPv6 pairs) carries
  // nothing: the protocol is not multiprotocol for it
  const open = new Set(base?.channels ?? []);
  for (const m of body.matchAll(/\b(ipv4|ipv6)\s*\{/g)) {
    const inner = block(body, m.index + m[0].length - 1);
    if (/\bimport\s+none\b/.test(inner) && /\bexport\s+none\b/.test(inner)) open.delete(m[1]!);
    else open.add(m[1]!);
  }
  return {
    neighbor: neighbor?.[0] ?? base?.neighbor,
    asn: neighbor ? Number(neighbor[1]) : base?.asn,
    interface: iface?.[1] ?? base?.interface,
    channels: [...open],
    extendedNextHop: /extended\s+next\s+hop\s+(on|yes)/.test(body) || (base?.extendedNextHop ?? false),
  };
}

/** Every `protocol bgp` reachable from bird.conf, templates applied. */
export async function readBird(birdConf: string): Promise<HandProtocol[]> {
  return (await readBirdTree(birdConf)).protocols;
}

/** Every `protocol bgp` reachable from bird.conf, templates applied, and the `template bgp`s as written. */
export async function readBirdTree(
  birdConf: string,
  opts: TreeOptions = {},
): Promise<{ protocols: HandProtocol[]; templates: Map<string, HandTemplate>; files: BirdFile[] }> {
  const files = await expandIncludes(birdConf, new Set(), opts);
  const filled = new Map<string, Body>();
  const templates = new Map<string, HandTemplate>();
  const protocols: HandProtocol[] = [];
  // templates first, over all files: BIRD needs them defined before use, and include order says where
  for (const { text } of files)
    for (const m of text.matchAll(/template\s+bgp\s+(\w+)(?:\s+from\s+(\w+))?\s*\{/g)) {
      const inner = block(text, m.index + m[0].length - 1);
      filled.set(m[1]!, readBody(inner, m[2] ? filled.get(m[2]) : undefined));
      templates.set(m[1]!, { ...(m[2] ? { from: m[2] } : {}), body: inner });
    }
  for (const { file, text } of files)
    for (const m of text.matchAll(/protocol\s+bgp\s+(\w+)(?:\s+from\s+(\w+))?\s*\{/g)) {
      const inner = block(text, m.index + m[0].length - 1);
      const body = readBody(inner, m[2] ? filled.get(m[2]) : undefined);
      if (!body.neighbor || body.asn === undefined) continue;
      const [address, scope] = body.neighbor.split('%');
      protocols.push({
        name: m[1]!,
        file,
        neighbor: address!,
        interface: scope?.replace(/'/g, '') ?? body.interface,
        asn: body.asn,
        channels: body.channels,
        extendedNextHop: body.extendedNextHop,
        ...(m[2] ? { from: m[2] } : {}),
        body: inner,
      });
    }
  return { protocols, templates, files };
}
