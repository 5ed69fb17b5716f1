/**
 * An adopted BGP protocol as the agent renders it (docs/agent.md, Adopting a running router): BIRD 2
 * restarts a BGP session on `configure` when anything of its protocol or channel options differs (local
 * and neighbor AS and address, interface, timers, passive, `import keep filtered`, next hop and extended
 * next hop…) but only reloads it when its filters alone change. So the agent renders the hand-made
 * protocol's own options (its templates' and its body's, as written) under its own name, and replaces
 * only the filters with peerops's. The text is the router's own files', read by root from its BIRD tree:
 * no value from the controller or a peer reaches it.
 */
import type { AgentSession, BirdConfigResponse } from '../../common/agent-api.ts';
import { BIRD_NAMES, latencyCommunity } from '../bird/names.ts';
import { channelFilters } from '../bird/peer-config.ts';
import type { HandProtocol, HandTemplate } from './read-files.ts';
import type { Adopted, AdoptedLink } from './takeover.ts';

/** The hand-made protocol without its filters: its template chain (root first) and its body. */
export interface KeptProtocol {
  name: string;
  /** Each template's statements. */
  templates: string[][];
  /** The protocol's own statements. */
  body: string[];
}

/** The statements of a BIRD block's text, each without its trailing `;`, braces balanced. */
function statements(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  const push = (end: number) => {
    const s = text.slice(start, end).trim();
    if (s) out.push(s);
    start = end + 1;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{') depth++;
    else if (c === '}' && --depth === 0) {
      // a block's end ends its statement; a `;` after it is part of it
      const rest = /^\s*;/.exec(text.slice(i + 1));
      push(i + 1);
      if (rest) {
        i += rest[0].length;
        start = i + 1;
      }
    } else if (c === ';' && depth === 0) push(i);
  }
  push(text.length);
  return out;
}

const CHANNEL = /^(ipv4|ipv6)\b\s*(?:\{([\s\S]*)\})?$/;
/** A channel's filter statement (`import filter …`, `export where …`, `import all`…), not its limits. */
const FILTER = /^(import|export)\s+(filter|where|all|none)\b/;

/** A channel the hand-made protocol carries nothing in (`import none; export none;`, the DN42 wiki's pairs). */
const isClosed = (channelBody: string) => {
  const stmts = statements(channelBody);
  return stmts.includes('import none') && stmts.includes('export none');
};

/** The statements without their channels' filters; a closed channel is kept as written. */
function withoutFilters(body: string): string[] {
  return statements(body).map((s) => {
    const m = CHANNEL.exec(s);
    if (!m || isClosed(m[2] ?? '')) return s;
    const kept = statements(m[2] ?? '').filter((c) => !FILTER.test(c));
    return `${m[1]} {${kept.map((c) => ` ${c};`).join('')} }`;
  });
}

/** Channels a kept protocol carries routes in (its templates' and its body's), each as last defined. */
function openChannels(kept: KeptProtocol): string[] {
  const last = new Map<string, boolean>();
  for (const stmts of [...kept.templates, kept.body])
    for (const s of stmts) {
      const m = CHANNEL.exec(s);
      if (m) last.set(m[1]!, !isClosed(m[2] ?? ''));
    }
  return [...last].filter(([, open]) => open).map(([name]) => name);
}

/** The kept form of a hand-made protocol; an error naming what is missing when its template is not defined. */
export function keepProtocol(p: HandProtocol, templates: ReadonlyMap<string, HandTemplate>): KeptProtocol {
  const chain: string[][] = [];
  for (let from = p.from; from !== undefined;) {
    const t = templates.get(from);
    if (!t) throw new Error(`protocol ${p.name}: template ${from} is not defined in the hand-made files`);
    if (chain.length > 16) throw new Error(`protocol ${p.name}: template chain too long`);
    chain.unshift(withoutFilters(t.body));
    from = t.from;
  }
  return { name: p.name, templates: chain, body: withoutFilters(p.body) };
}

/**
 * The protocol's text with peerops's filter statements (`import where …;`, `export where …;`) in each
 * of its channels; its templates are renamed `<name>_kept<i>`, one set per protocol, so two adopted
 * protocols from one hand-made template stay independent.
 */
export function renderKeptProtocol(kept: KeptProtocol, filters: string): string {
  const lines: string[] = [];
  const block = (stmts: string[]) => stmts.map((s) => `  ${s};\n`).join('');
  kept.templates.forEach((stmts, i) => {
    const from = i ? ` from ${kept.name}_kept${i - 1}` : '';
    lines.push(`template bgp ${kept.name}_kept${i}${from} {\n${block(stmts)}}`);
  });
  const stmts = kept.body;
  const open = openChannels(kept);
  const body = stmts.map((s) => {
    const m = CHANNEL.exec(s);
    if (!m || !open.includes(m[1]!)) return s;
    return `${m[1]} {${statements(m[2] ?? '')
      .map((c) => ` ${c};`)
      .join('')} ${filters} }`;
  });
  for (const c of open) if (!stmts.some((s) => CHANNEL.exec(s)?.[1] === c)) body.push(`${c} { ${filters} }`);
  const from = kept.templates.length ? ` from ${kept.name}_kept${kept.templates.length - 1}` : '';
  lines.push(`protocol bgp ${kept.name}${from} {\n${block(body)}}`);
  return `${lines.join('\n')}\n`;
}

/**
 * An adopted session's file: its hand-made protocols under their own names and options, with peerops's
 * filters (this file's head says why only those).
 */
export function renderAdoptedPeer(
  s: AgentSession,
  a: Adopted,
  kept: AdoptedLink,
  policy: BirdConfigResponse,
  rtt: number | null | undefined,
): string {
  const filters = channelFilters(
    {
      importFilter: BIRD_NAMES.importFilter,
      exportFilter: BIRD_NAMES.exportFilter,
      latency: latencyCommunity(rtt),
      bandwidth: policy.communities.bandwidth,
      crypto: policy.communities.crypto,
    },
    '',
    ' ',
  ).trimEnd();
  const head =
    `# Rendered by peerops for session ${s.uuid}, adopted from the link ${a.interface}; changes here are overwritten.\n` +
    `# The hand-made protocols' own options, so BIRD keeps the sessions; peerops's filters (docs/agent.md).\n`;
  return head + kept.protocols.map((p) => renderKeptProtocol(p, filters)).join('\n');
}
