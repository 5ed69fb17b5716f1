/**
 * The shell blocks of a markdown page, as a reader copies them: each fenced ```sh, ```bash or
 * ```console block (indented ones in lists too) with the heading and the bold lead-in it sits under.
 * A block the doc tests must not run carries `<!-- doc-blocks: not run: <reason> -->` on the line
 * before its fence.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';

export interface ShellBlock {
  /** The page, relative to the repository. */
  file: string;
  /** The line of the opening fence, 1-based. */
  line: number;
  /** The nearest heading above, `#`s included. */
  heading: string;
  /** The last bold lead-in (`**Any Linux: npm.**`) under that heading, or ''. */
  lead: string;
  /** The commands as the reader copies them (a console block: its `$ ` lines without the prompt). */
  script: string;
  /** The text line just before the block (`Users (details in …):`), or ''. */
  intro: string;
  /** Why the doc tests leave it out, from its marker. */
  notRun?: string;
}

const SHELL_LANGS = new Set(['sh', 'bash', 'console']);
const NOT_RUN = /^<!-- doc-blocks: not run: (.+?) -->$/;

export async function shellBlocks(repo: string, file: string): Promise<ShellBlock[]> {
  const lines = (await readFile(path.join(repo, file), 'utf8')).split('\n');
  const blocks: ShellBlock[] = [];
  let heading = '';
  let lead = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const fence = /^(\s*)```(\w*)\s*$/.exec(line);
    if (!fence) {
      if (/^#{1,6} /.test(line)) [heading, lead] = [line.trim(), ''];
      const bold = /^\*\*(.+?)\*\*/.exec(line);
      if (bold) lead = bold[1] ?? '';
      continue;
    }
    const indent = fence[1] ?? '';
    const lang = fence[2] ?? '';
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i]?.trim() !== '```'; i++)
      body.push((lines[i] ?? '').slice(indent.length));
    if (!SHELL_LANGS.has(lang)) continue;
    let before = start - 1;
    while (before >= 0 && lines[before]?.trim() === '') before--;
    const notRun = NOT_RUN.exec(lines[before]?.trim() ?? '')?.[1];
    if (notRun) before--;
    while (before >= 0 && lines[before]?.trim() === '') before--;
    const intro = lines[before]?.trim() ?? '';
    const script = lang === 'console' ? body.filter((l) => l.startsWith('$ ')).map((l) => l.slice(2)) : body;
    blocks.push({ file, line: start + 1, heading, lead, intro, script: `${script.join('\n')}\n`, notRun });
  }
  return blocks;
}

/** `README.md:75 (## Quick start)`: how the tests name a block. */
export function blockName(block: ShellBlock): string {
  return `${block.file}:${block.line} (${block.heading}${block.lead ? `, ${block.lead}` : ''})`;
}

/** docs/operator-guide.md's sections whose blocks run on a router: a new one, one with hand-made peers. */
export const NEW_ROUTER_SECTION = '## 5. Install the agent on the router';
const ROUTER_SECTIONS = [NEW_ROUTER_SECTION, '## 10. Moving an existing router'];

/**
 * Where a block is meant to run: on a router (ROUTER_SECTIONS), on a user's machine (the README's block
 * for users), or on the operator's machine (the rest).
 */
export function where(block: ShellBlock): 'router' | 'user' | 'operator' {
  if (ROUTER_SECTIONS.some((section) => block.heading.startsWith(section))) return 'router';
  if (block.intro.startsWith('Users ')) return 'user';
  return 'operator';
}
