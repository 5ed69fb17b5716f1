/**
 * The hand-made protocols a takeover leaves running (docs/agent.md, Taking the peers over): a hand-made
 * BIRD file the takeover sets aside may define more than the adopted sessions' protocols (the one file
 * of every peer, a peer the plan leaves, one adopted later). What it defines besides them is rendered
 * into one file of the agent's, `peerops-not-adopted.conf` in peerConfDir, self-contained: each
 * remaining protocol as written, and the definitions it uses from anywhere in the hand-made tree
 * (templates, functions, filters, constants, tables, attributes). BIRD compares a protocol by its
 * options and filters, not by the names of the templates or constants it was written with, so:
 *   - templates and constants are renamed `hand_<name>` (they could clash with peerops's main file:
 *     `dnpeers`, `OWNAS`, `OWNIP`);
 *   - functions and filters keep their names, which BIRD compares (a new name reloads the channel), and
 *     are renamed `hand_<name>` only where peerops's main file defines the name (`is_valid_network`,
 *     `is_self_net`): then BIRD reloads that channel once, and the session stays up;
 *   - tables and attributes keep their names: another name would be another table.
 * Pure: texts in, text out.
 */
import { REMAINDER_HEAD, type BirdFile } from './read-files.ts';

/** The agent's file of hand-made protocols no session adopted, in peerConfDir. */
export const REMAINDER_FILE = 'peerops-not-adopted.conf';
const PREFIX = 'hand_';

type Kind = 'define' | 'function' | 'filter' | 'template' | 'table' | 'attribute' | 'protocol' | 'other';

/** One top-level statement or block of a BIRD file. */
interface Item {
  kind: Kind;
  /** The name it defines (a protocol's own name; undefined for an unnamed protocol). */
  name?: string;
  text: string;
}

/** Each top-level statement of a BIRD text: up to a `;` or a block's closing brace (with a `;` after it). */
function items(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  let quote: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = undefined;
      continue;
    }
    if (c === '"' || c === "'") quote = c;
    else if (c === '{') depth++;
    else if ((c === '}' && --depth === 0) || (c === ';' && depth === 0)) {
      let end = i + 1;
      if (c === '}') {
        const semi = /^\s*;/.exec(text.slice(end));
        if (semi) end += semi[0].length;
      }
      const s = text.slice(start, end).trim();
      if (s) out.push(s);
      start = end;
      i = end - 1;
    }
  }
  return out;
}

const SHAPES: [Kind, RegExp][] = [
  ['define', /^define\s+(\w+)/],
  ['function', /^function\s+(\w+)/],
  ['filter', /^filter\s+(\w+)/],
  ['template', /^template\s+\w+\s+(\w+)/],
  ['table', /^\w+\s+table\s+(\w+)/],
  ['attribute', /^attribute\s+\w+\s+(\w+)/],
  ['protocol', /^protocol\s+\w+(?:\s+(?!from\b)(\w+))?/],
];

function classify(text: string): Item {
  for (const [kind, re] of SHAPES) {
    const m = re.exec(text);
    if (m) return { kind, ...(m[1] ? { name: m[1] } : {}), text };
  }
  return { kind: 'other', text };
}

const TOKEN = /"[^"]*"|'[^']*'|[A-Za-z_]\w*/g;

/** The identifiers a text names, strings left out. */
function names(text: string): Set<string> {
  return new Set([...text.matchAll(TOKEN)].map((m) => m[0]).filter((t) => !/^["']/.test(t)));
}

function rename(text: string, renamed: ReadonlyMap<string, string>): string {
  return text.replace(TOKEN, (t) => renamed.get(t) ?? t);
}

/** The names of the functions, filters, templates and constants a BIRD text defines at its top level. */
export function definedNames(text: string): Set<string> {
  const out = new Set<string>();
  for (const s of items(text.replace(/#.*$/gm, ''))) {
    const item = classify(s);
    if (item.name && item.kind !== 'protocol' && item.kind !== 'other') out.add(item.name);
  }
  return out;
}

export interface RemainderInput {
  /** The hand-made tree as the operator wrote it (read-files.ts readBirdTree with setAsideSuffix). */
  files: readonly BirdFile[];
  /** The set-aside BIRD files whose remaining protocols are kept (not the hand-made main file). */
  setAside: ReadonlySet<string>;
  /** Every protocol a session adopted: in the agent's files now. */
  adopted: ReadonlySet<string>;
  /** Names peerops's main file defines. */
  mainNames: ReadonlySet<string>;
}

/** The file of the remaining protocols, or undefined when the set-aside files define none but adopted ones. */
export function renderRemainder(input: RemainderInput): string | undefined {
  const all = input.files.flatMap((f) => items(f.text).map((text) => ({ file: f.file, ...classify(text) })));
  const kept = all.filter(
    (i) => i.kind === 'protocol' && input.setAside.has(i.file) && !(i.name && input.adopted.has(i.name)),
  );
  if (kept.length === 0) return undefined;
  const definitions = new Map<string, Item>();
  for (const i of all)
    if (i.name && i.kind !== 'protocol' && i.kind !== 'other' && !definitions.has(i.name))
      definitions.set(i.name, i);
  // what the remaining protocols use, and what that uses in turn
  const used = new Set<string>();
  const queue = kept.map((i) => i.text);
  for (let text = queue.pop(); text !== undefined; text = queue.pop())
    for (const n of names(text)) {
      const d = definitions.get(n);
      if (d && !used.has(n)) {
        used.add(n);
        queue.push(d.text);
      }
    }
  const renamed = new Map<string, string>();
  for (const n of used) {
    const kind = definitions.get(n)!.kind;
    const clashes = input.mainNames.has(n);
    if (kind === 'template' || kind === 'define' || ((kind === 'function' || kind === 'filter') && clashes))
      renamed.set(n, `${PREFIX}${n}`);
  }
  // in the tree's order, which BIRD accepted: each definition before its use
  const out = all.filter((i) => (i.name && used.has(i.name) && i.kind !== 'protocol') || kept.includes(i));
  const from = [...new Set(kept.map((i) => i.file))].join(', ');
  return (
    `${REMAINDER_HEAD} as written in ${from}, set aside by a takeover;\n` +
    `# no session adopted them (docs/agent.md, Taking the peers over). Each takeover writes it anew.\n` +
    out.map((i) => `${rename(i.text, renamed)}\n`).join('\n')
  );
}
