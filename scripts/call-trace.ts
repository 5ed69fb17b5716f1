/**
 * The call trace of one operation (docs/architecture.md, "The create trace"): which project files it
 * runs and whether each call between two of them goes down the import direction or back up it. Used by
 * scripts/trace-create.ts and scripts/trace-agent-pass.ts.
 *
 * V8's precise coverage counts the functions the operation runs; those a baseline operation runs (the
 * framing both share) are taken away. A sampling CPU profile of many runs gives the calls between two
 * project files (a frame directly under another; calls through a library or an await are not seen).
 * Each call is judged against the static value imports (type-only imports left out):
 *   down      the caller imports the callee (directly or through others)
 *   injected  neither imports the other: called through an interface the caller holds
 *   reversal  the callee imports the caller, not the other way: a call up the layers, through a
 *             function or an object the caller was handed or holds
 *   argument  the same, but the callee is a function written as an argument of the call that handed it
 *             down (a queue, a map or a retry loop running what it was given): no layer is called back
 *   cycle     each imports the other
 */
import { readFileSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(import.meta.dirname, '..');

interface FunctionCoverage {
  functionName: string;
  ranges: { startOffset: number; endOffset: number; count: number }[];
}
interface ScriptCoverage {
  url: string;
  functions: FunctionCoverage[];
}
interface ProfileNode {
  id: number;
  callFrame: { url: string; functionName: string; lineNumber: number; columnNumber: number };
  children?: number[];
}

/** A project source file's path from ROOT under `dirs`, or undefined (a library, node, tests, scripts). */
function projectFile(url: string, dirs: readonly string[]): string | undefined {
  if (!url.startsWith('file://')) return undefined;
  const path = relative(ROOT, fileURLToPath(url));
  if (path.startsWith('..') || path.includes('node_modules')) return undefined;
  return dirs.some((d) => path.startsWith(`${d}/`)) ? path : undefined;
}

/** The functions that ran, as `file#start`, grouped by file. */
function ranFunctions(coverage: ScriptCoverage[], dirs: readonly string[]): Map<string, Set<string>> {
  const ran = new Map<string, Set<string>>();
  for (const script of coverage) {
    const file = projectFile(script.url, dirs);
    if (file === undefined) continue;
    for (const fn of script.functions) {
      const whole = fn.ranges[0];
      if (whole === undefined || whole.count === 0) continue;
      const set = ran.get(file) ?? new Set<string>();
      set.add(`${whole.startOffset}:${fn.functionName}`);
      ran.set(file, set);
    }
  }
  return ran;
}

/** Every .ts source file under `dirs` with the project files it imports as values. */
async function valueImports(dirs: readonly string[]): Promise<Map<string, Set<string>>> {
  const graph = new Map<string, Set<string>>();
  const statement = /(?:^|\n)\s*(import|export)\s+(type\s+)?([^;]*?)\s*from\s+'(\.[^']+)'/g;
  const dynamic = /import\(\s*'(\.[^']+)'\s*\)/g;
  for (const dir of dirs) {
    for (const entry of await readdir(join(ROOT, dir), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts')) continue;
      const file = relative(ROOT, join(entry.parentPath, entry.name));
      const text = await readFile(join(ROOT, file), 'utf8');
      const targets = new Set<string>();
      const add = (spec: string) => targets.add(relative(ROOT, resolve(ROOT, dirname(file), spec)));
      for (const m of text.matchAll(statement)) {
        if (m[2] !== undefined) continue;
        const names = m[3] ?? '';
        const braced = /^\{([^}]*)\}$/s.exec(names.trim());
        // `import { type A, type B }` is type-only as well
        const onlyTypes =
          braced?.[1] !== undefined &&
          braced[1]
            .split(',')
            .map((n) => n.trim())
            .filter((n) => n !== '')
            .every((n) => n.startsWith('type '));
        if (!onlyTypes) add(m[4] ?? '');
      }
      for (const m of text.matchAll(dynamic)) add(m[1] ?? '');
      graph.set(file, targets);
    }
  }
  return graph;
}

function reaches(graph: Map<string, Set<string>>, from: string, to: string): boolean {
  const seen = new Set([from]);
  const todo = [from];
  for (let file = todo.pop(); file !== undefined; file = todo.pop()) {
    for (const next of graph.get(file) ?? []) {
      if (next === to) return true;
      if (!seen.has(next)) {
        seen.add(next);
        todo.push(next);
      }
    }
  }
  return false;
}

const sources = new Map<string, string[]>();

/**
 * Is the function starting at (line, column) of `file` written as an argument: `f(a, (x) => …)`, also
 * when it starts a line of its own?
 */
function writtenAsArgument(file: string, line: number, column: number): boolean {
  let lines = sources.get(file);
  if (lines === undefined) {
    lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
    sources.set(file, lines);
  }
  let before = (lines[line] ?? '')
    .slice(0, column)
    .replace(/\basync\s*$/, '')
    .trimEnd();
  for (let up = line - 1; before === '' && up >= 0; up--) before = (lines[up] ?? '').trimEnd();
  return before.endsWith('(') || before.endsWith(',');
}

interface CallEdge {
  samples: number;
  /** Some sampled callee was written as an argument of the caller's call. */
  argument: boolean;
  /** Some sampled callee was not. */
  member: boolean;
}

/** Caller file → callee file, for each profile frame directly under a frame of another project file. */
function callEdges(nodes: ProfileNode[], dirs: readonly string[]): Map<string, CallEdge> {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const edges = new Map<string, CallEdge>();
  for (const node of nodes) {
    const caller = projectFile(node.callFrame.url, dirs);
    if (caller === undefined) continue;
    for (const id of node.children ?? []) {
      const frame = byId.get(id)?.callFrame;
      const callee = projectFile(frame?.url ?? '', dirs);
      if (frame === undefined || callee === undefined || callee === caller) continue;
      const key = `${caller} -> ${callee}`;
      const edge = edges.get(key) ?? { samples: 0, argument: false, member: false };
      edge.samples++;
      if (writtenAsArgument(callee, frame.lineNumber, frame.columnNumber)) edge.argument = true;
      else edge.member = true;
      edges.set(key, edge);
    }
  }
  return edges;
}

export interface TraceSubject {
  /** Source directories the trace looks at (e.g. common and controller). */
  dirs: readonly string[];
  /** What one run is, for the output ("create", "pass"). */
  what: string;
  /** What the baseline is ("a read"). */
  baselineWhat: string;
  /** The framing the operation shares with others; its functions are not the operation's. */
  baseline(): Promise<void>;
  /** The run whose functions are counted (after the baseline, with the same credentials). */
  run(): Promise<void>;
  /** One of the runs the CPU profile samples. */
  profiledRun(): Promise<void>;
  /** How many runs the CPU profile samples. */
  runs: number;
  /** The file-count target, when there is one. */
  fileTarget?: number;
}

/** Trace `subject` in this process and print its files, its calls and their direction, with load. */
export async function printTrace(subject: TraceSubject): Promise<void> {
  const { dirs } = subject;
  const inspector = new Session();
  inspector.connect();
  try {
    const take = async () =>
      ranFunctions(
        ((await inspector.post('Profiler.takePreciseCoverage')) as { result: ScriptCoverage[] }).result,
        dirs,
      );
    await inspector.post('Profiler.enable');
    await inspector.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
    await take();
    await subject.baseline();
    const baseline = await take();
    await subject.run();
    const ran = await take();
    await inspector.post('Profiler.stopPreciseCoverage');

    const path = new Map<string, number>();
    for (const [file, fns] of ran) {
      const own = [...fns].filter((f) => !(baseline.get(file)?.has(f) ?? false)).length;
      if (own > 0) path.set(file, own);
    }

    await inspector.post('Profiler.setSamplingInterval', { interval: 50 });
    await inspector.post('Profiler.start');
    for (let i = 0; i < subject.runs; i++) await subject.profiledRun();
    const { profile } = (await inspector.post('Profiler.stop')) as { profile: { nodes: ProfileNode[] } };

    const graph = await valueImports(dirs);
    const judged = { down: 0, injected: 0, reversal: 0, argument: 0, cycle: 0 };
    const lines: string[] = [];
    for (const [edge, { samples, argument, member }] of [...callEdges(profile.nodes, dirs)].sort()) {
      const [caller = '', callee = ''] = edge.split(' -> ');
      if (!path.has(caller) || !path.has(callee)) continue;
      const down = reaches(graph, caller, callee);
      const up = reaches(graph, callee, caller);
      const kind =
        down && up
          ? 'cycle'
          : down
            ? 'down'
            : !up
              ? 'injected'
              : argument && !member
                ? 'argument'
                : 'reversal';
      judged[kind]++;
      lines.push(`  ${kind.padEnd(9)} ${edge}  (${samples} samples)`);
    }

    console.log(`files a ${subject.what} runs beyond ${subject.baselineWhat} (functions of its own):`);
    for (const [file, own] of [...path].sort()) console.log(`  ${file}  (${own})`);
    console.log(`calls between them (sampled over ${subject.runs} runs):`);
    for (const l of lines) console.log(l);
    const load = loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
    const target = subject.fileTarget;
    const files =
      target === undefined
        ? `files ${path.size}`
        : `files ${path.size} (target < ${target}: ${path.size < target ? 'PASS' : 'FAIL'})`;
    console.log(
      `${files}; calls: ${judged.down} down, ${judged.injected} injected, ${judged.argument} argument, ` +
        `${judged.reversal} reversal, ${judged.cycle} cycle ` +
        `(target 0 reversal, 0 cycle: ${judged.reversal + judged.cycle === 0 ? 'PASS' : 'FAIL'}); load ${load}`,
    );
  } finally {
    inspector.disconnect();
  }
}
