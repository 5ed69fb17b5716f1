/**
 * `peerops validate [--base <ref>] [--format text|github|json] [dir]`: answers what the controller's git
 * store would do with a merge of a GitOps repository checkout (docs/gitops.md): the same rules
 * (common/judge-tree.ts), against the base branch's tree when `--base` is given. Exit status 0 when clean,
 * 1 on any problem, 2 on a usage error.
 */
import { stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { parseArgs } from 'node:util';
import { usageError } from '../common/usage.ts';
import { problemReason, validateChange, type ChangeReport, type Tree } from '../common/judge-tree.ts';
import { readDirectoryTree, runGit, workTreeChange } from '../common/read-tree.ts';

const USAGE = `usage: peerops validate [--base <ref>] [--format text|github|json] [dir]

Checks the manifests of a GitOps repository checkout (default: the current directory) with the rules the
controller's git store applies to a merge:
  routers/<name>.yaml, sessions/<router>/as<asn>.yaml, policy/<name>.yaml
Any other *.yaml/*.yml is reported (a manifest the store would never read); other files, and anything
under a directory starting with a dot (.github/, .forgejo/, .gitea/), are ignored.

  --base <ref>     judge the merge: the tree of <ref> (e.g. origin/main) with this checkout's changes since
                   the merge base laid over it; reports the changed files, and unchanged files the change
                   breaks (needs git and a checkout holding <ref>: fetch-depth 0 in CI)
  --format <f>     text (default): one line per problem, then ok / n problems per file;
                   github: ::error annotations for GitHub Actions; json: one JSON document (docs/gitops.md)

Each problem in text form is
  <file>: <json pointer>: <reason>
Exit status: 0 when clean, 1 on any problem, 2 on a usage error.`;

const FORMATS = ['text', 'github', 'json'] as const;
type Format = (typeof FORMATS)[number];

/**
 * The line of the key a JSON pointer names (`/spec/listenPort`), found by indentation in the YAML text;
 * for a list index, the line of that item. The deepest segment found wins; 1 when not even the first is
 * there (a pointer `/`, a file that is gone). A YAML syntax error's own position is used for `/`.
 */
export function pointerLine(text: string | undefined, pointer: string, message = ''): number {
  if (text === undefined) return 1;
  const yamlError = /^not valid YAML: .*\((\d+):\d+\)$/.exec(message);
  if (pointer === '/' && yamlError) return Number(yamlError[1]);
  // a bound of the file names its line (common/manifests.ts, parseYaml)
  const bound = /^line (\d+): /.exec(message);
  if (pointer === '/' && bound) return Number(bound[1]);
  const lines = text.split(/\r?\n/);
  const segments = pointer
    .split('/')
    .slice(1)
    .filter((s) => s !== '')
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
  let found = 0; // 1-based line of the deepest segment found; 0: none
  let parentIndent = -1;
  for (const segment of segments) {
    const index = /^\d+$/.test(segment) ? Number(segment) : undefined;
    let childIndent: number | undefined;
    let item = -1;
    let hit = -1;
    for (let i = found; i < lines.length; i++) {
      const line = lines[i] as string;
      if (/^\s*(#|$)/.test(line)) continue;
      const indent = line.length - line.trimStart().length;
      const body = line.slice(indent);
      // a block list may sit at its key's own indentation
      const dash = body.startsWith('- ') || body === '-';
      if (indent < parentIndent || (indent === parentIndent && !(index !== undefined && dash))) break;
      childIndent ??= indent;
      if (indent !== childIndent) continue; // deeper: a grandchild
      if (index !== undefined) {
        if (dash && ++item === index) hit = i;
      } else {
        const key = /^(?:"([^"]*)"|'([^']*)'|([^\s:#'"-][^:#]*?))\s*:(\s|$)/.exec(body);
        if (key && (key[1] ?? key[2] ?? key[3]) === segment) hit = i;
      }
      if (hit >= 0) break;
    }
    if (hit < 0) break;
    found = hit + 1;
    const parent = lines[hit] as string;
    parentIndent = parent.length - parent.trimStart().length;
    if (index !== undefined) break; // keys inside a list item: its line is close enough
  }
  return found || 1;
}

/** GitHub's workflow command escaping: in data `%`, CR, LF; in a property also `:` and `,`. */
function escapeData(s: string): string {
  return s.replaceAll('%', '%25').replaceAll('\r', '%0D').replaceAll('\n', '%0A');
}
function escapeProperty(s: string): string {
  return escapeData(s).replaceAll(':', '%3A').replaceAll(',', '%2C');
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The JSON document of `--format json` (its shape is documented in docs/gitops.md). */
export interface JsonReport {
  ok: boolean;
  base: string | null;
  problems: number;
  counts: ChangeReport['counts'];
  files: {
    file: string;
    changed: boolean;
    ok: boolean;
    problems: { pointer: string; message: string; line: number }[];
  }[];
}

export function jsonReport(report: ChangeReport, tree: Tree, base: string | undefined): JsonReport {
  return {
    ok: report.problemCount === 0,
    base: base ?? null,
    problems: report.problemCount,
    counts: report.counts,
    files: report.files.map((f) => ({
      file: f.file,
      changed: f.changed,
      ok: f.problems.length === 0,
      problems: f.problems.map((p) => ({
        pointer: p.pointer,
        message: p.message,
        line: pointerLine(tree.get(f.file), p.pointer, p.message),
      })),
    })),
  };
}

/** Prints the report in `format`; `annotationPath` maps a file to the path GitHub annotates. */
function print(
  report: ChangeReport,
  tree: Tree,
  format: Format,
  base: string | undefined,
  annotationPath: (file: string) => string,
): void {
  if (format === 'json') {
    console.log(JSON.stringify(jsonReport(report, tree, base), null, 2));
    return;
  }
  for (const f of report.files)
    for (const p of f.problems) {
      const reason = problemReason(f, p);
      if (format === 'github') {
        const line = pointerLine(tree.get(f.file), p.pointer, p.message);
        console.log(
          `::error file=${escapeProperty(annotationPath(f.file))},line=${line}::${escapeData(`${p.pointer}: ${reason}`)}`,
        );
      } else console.log(`${f.file}: ${p.pointer}: ${reason}`);
    }
  for (const f of report.files)
    console.log(`${f.file}: ${f.problems.length === 0 ? 'ok' : plural(f.problems.length, 'problem')}`);
  const { routers, sessions, policies } = report.counts;
  const counts = `${routers} router(s), ${sessions} session(s), ${policies} policy file(s)`;
  const what =
    base === undefined
      ? counts
      : `checked ${plural(report.files.length, 'file')} against ${base}; ${counts} after the merge`;
  if (report.problemCount > 0)
    console.error(
      `peerops validate: ${report.problemCount} problem(s)${base === undefined ? ' in' : ';'} ${what}`,
    );
  else console.log(`peerops validate: ok: ${what}`);
}

export async function main(argv: string[]): Promise<number> {
  let values: { base?: string; format?: string; help?: boolean };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        base: { type: 'string' },
        format: { type: 'string', default: 'text' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    return usageError(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}`);
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const format = values.format as Format;
  if (!FORMATS.includes(format)) return usageError(`--format must be text, github or json\n\n${USAGE}`);
  if (positionals.length > 1) return usageError(`at most one directory\n\n${USAGE}`);
  if (values.base === '') return usageError(`--base needs a ref (e.g. origin/main)\n\n${USAGE}`);
  const root = positionals[0] ?? '.';
  try {
    // a mistyped path is not "a repository without a default policy"
    if (!(await stat(root)).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    return usageError(`cannot read ${root}: ${err instanceof Error ? err.message : String(err)}`);
  }

  let tree: Tree;
  let report: ChangeReport;
  const base = values.base;
  if (base === undefined) {
    try {
      const read = await readDirectoryTree(root);
      tree = read.files;
      report = validateChange(tree, undefined, read.refused);
    } catch (err) {
      return usageError(`cannot read ${root}: ${err instanceof Error ? err.message : String(err)}`);
    }
  } else {
    try {
      await runGit(['rev-parse', '--verify', '--quiet', `${base}^{commit}`], root).catch(() => {
        throw new Error(
          `${base} is not a commit of the checkout at ${root} (in CI, check out with fetch-depth: 0 so that the base branch is there)`,
        );
      });
      const change = await workTreeChange(root, base);
      tree = change.next;
      report = validateChange(change.next, { tree: change.base, changed: change.changed }, change.refused);
    } catch (err) {
      return usageError(`--base ${base}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  // GitHub resolves an annotation's file from the workspace root, where CI steps run
  const annotationPath = (file: string) => relative(process.cwd(), join(root, file)).split(sep).join('/');
  print(report, tree, format, base, annotationPath);
  return report.problemCount > 0 ? 1 : 0;
}
