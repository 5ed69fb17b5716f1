/**
 * The create trace (docs/architecture.md, "The create trace"): which project files a peer's session
 * create runs, from the route to the commit, and whether each call between two of them goes down the
 * import direction or back up it.
 *
 * A real controller on the real git store, in this process (test/api/helpers.ts). After a few warm-up
 * creates, V8's precise coverage counts the functions one `POST /session` create runs; the functions a
 * `GET /session` of the same user runs are taken away (the request framing both share: auth, rate
 * limit, schema check, the answer's hooks), so what is left is the route, the state layer, the back end
 * and the git layer. A sampling CPU profile of many creates gives the calls between two project files
 * (a frame directly under another; calls through a library or an await are not seen). Each call is judged
 * against the static value imports (type-only imports left out):
 *   down      the caller imports the callee (directly or through others)
 *   injected  neither imports the other: called through an interface the caller holds
 *   reversal  the callee imports the caller, not the other way: a call up the layers, through a
 *             function or an object the caller was handed or holds
 *   argument  the same, but the callee is a function written as an argument of the call that handed it
 *             down (a queue, a map or a retry loop running what it was given): no layer is called back
 *   cycle     each imports the other
 *
 *   node scripts/trace-create.ts            (CREATES=200 profiled creates)
 */
import { readFileSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { driver, startHarness } from '../test/api/helpers.ts';

const ROOT = resolve(import.meta.dirname, '..');
const SOURCE_DIRS = ['common', 'controller'];
const CREATES = Number(process.env.CREATES ?? 200);

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

/** A project source file's path from ROOT, or undefined for a library, node internals or tests. */
function projectFile(url: string): string | undefined {
  if (!url.startsWith('file://')) return undefined;
  const path = relative(ROOT, fileURLToPath(url));
  if (path.startsWith('..') || path.includes('node_modules')) return undefined;
  return SOURCE_DIRS.some((d) => path.startsWith(`${d}/`)) ? path : undefined;
}

/** The functions that ran, as `file#start`, grouped by file. */
function ranFunctions(coverage: ScriptCoverage[]): Map<string, Set<string>> {
  const ran = new Map<string, Set<string>>();
  for (const script of coverage) {
    const file = projectFile(script.url);
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

/** Every .ts source file under SOURCE_DIRS with the project files it imports as values. */
async function valueImports(): Promise<Map<string, Set<string>>> {
  const graph = new Map<string, Set<string>>();
  const statement = /(?:^|\n)\s*(import|export)\s+(type\s+)?([^;]*?)\s*from\s+'(\.[^']+)'/g;
  const dynamic = /import\(\s*'(\.[^']+)'\s*\)/g;
  for (const dir of SOURCE_DIRS) {
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

/** Is the function starting at (line, column) of `file` written as an argument: `f(a, (x) => …)`? */
function writtenAsArgument(file: string, line: number, column: number): boolean {
  let lines = sources.get(file);
  if (lines === undefined) {
    lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
    sources.set(file, lines);
  }
  const before = (lines[line] ?? '')
    .slice(0, column)
    .replace(/\basync\s*$/, '')
    .trimEnd();
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
function callEdges(nodes: ProfileNode[]): Map<string, CallEdge> {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const edges = new Map<string, CallEdge>();
  for (const node of nodes) {
    const caller = projectFile(node.callFrame.url);
    if (caller === undefined) continue;
    for (const id of node.children ?? []) {
      const frame = byId.get(id)?.callFrame;
      const callee = projectFile(frame?.url ?? '');
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

const h = await startHarness();
const inspector = new Session();
try {
  inspector.connect();
  const agentToken = await h.addRouter('r1');
  const d = driver(h, 'r1', agentToken);
  for (let i = 0; i < 5; i++) await d.create();
  const user = d.freshUser();
  await h.get('/session', user);

  await inspector.post('Profiler.enable');
  await inspector.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
  await inspector.post('Profiler.takePreciseCoverage');
  await h.get('/session', user);
  const read = ranFunctions(
    ((await inspector.post('Profiler.takePreciseCoverage')) as { result: ScriptCoverage[] }).result,
  );
  await d.create(user);
  const created = ranFunctions(
    ((await inspector.post('Profiler.takePreciseCoverage')) as { result: ScriptCoverage[] }).result,
  );
  await inspector.post('Profiler.stopPreciseCoverage');

  const path = new Map<string, number>();
  for (const [file, fns] of created) {
    const own = [...fns].filter((f) => !(read.get(file)?.has(f) ?? false)).length;
    if (own > 0) path.set(file, own);
  }

  await inspector.post('Profiler.setSamplingInterval', { interval: 50 });
  await inspector.post('Profiler.start');
  for (let i = 0; i < CREATES; i++) await d.create();
  const { profile } = (await inspector.post('Profiler.stop')) as { profile: { nodes: ProfileNode[] } };

  const graph = await valueImports();
  const judged = { down: 0, injected: 0, reversal: 0, argument: 0, cycle: 0 };
  const lines: string[] = [];
  for (const [edge, { samples, argument, member }] of [...callEdges(profile.nodes)].sort()) {
    const [caller = '', callee = ''] = edge.split(' -> ');
    if (!path.has(caller) || !path.has(callee)) continue;
    const down = reaches(graph, caller, callee);
    const up = reaches(graph, callee, caller);
    const kind =
      down && up ? 'cycle' : down ? 'down' : !up ? 'injected' : argument && !member ? 'argument' : 'reversal';
    judged[kind]++;
    lines.push(`  ${kind.padEnd(9)} ${edge}  (${samples} samples)`);
  }

  console.log(`files a create runs beyond a read (functions of its own):`);
  for (const [file, own] of [...path].sort()) console.log(`  ${file}  (${own})`);
  console.log(`calls between them (sampled over ${CREATES} creates):`);
  for (const l of lines) console.log(l);
  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  console.log(
    `files ${path.size} (target < 20: ${path.size < 20 ? 'PASS' : 'FAIL'}); calls: ${judged.down} down, ` +
      `${judged.injected} injected, ${judged.argument} argument, ${judged.reversal} reversal, ${judged.cycle} cycle ` +
      `(target 0 reversal, 0 cycle: ${judged.reversal + judged.cycle === 0 ? 'PASS' : 'FAIL'}); load ${load}`,
  );
} finally {
  inspector.disconnect();
  await h.close();
}
