/**
 * The Node options the agent runs with however it is shipped (the release launcher, the npm package's
 * `peerops`, the agent image): V8 without its optimizing compilers (Maglev, Turbofan) but with its
 * baseline one (Sparkplug), tuned for size, with a young generation of 1 MiB a semi-space. They keep the
 * agent near 72 MiB at 100 sessions instead of 85. Sparkplug stays: without it the interpreter runs
 * everything, which took a no-op pass at 1,000 sessions from 2.4 to 4.5 s for 3 MiB less
 * (docs/agent.md, Memory and speed). Not --lite-mode: it implies --jitless, which leaves out
 * WebAssembly, and fetch (self-update) needs it. On node's command line, for the agent only: the
 * controller and the CLI keep every compiler. PEEROPS_AGENT_NODE_ARGS replaces them (empty: none).
 */
export const AGENT_NODE_ARGS = [
  '--max-semi-space-size=1',
  '--no-opt',
  '--no-maglev',
  '--optimize-for-size',
] as const;
export const AGENT_NODE_ARGS_ENV = 'PEEROPS_AGENT_NODE_ARGS';

/** The options the agent should run with: PEEROPS_AGENT_NODE_ARGS (split on blanks) when set. */
export function agentNodeArgs(env: NodeJS.ProcessEnv = process.env): string[] {
  const set = env[AGENT_NODE_ARGS_ENV];
  return set === undefined ? [...AGENT_NODE_ARGS] : set.split(/\s+/).filter(Boolean);
}

/** A node option's name as node reads it: `--max_semi_space_size=4` and `--no-opt` name `--max-semi-space-size`, `--opt`. */
const optionName = (arg: string) => (arg.split('=')[0] ?? arg).replaceAll('_', '-').replace(/^--no-/, '--');

/** Those of `wanted` node was not started with; one given with another value counts as given. */
export function missingNodeArgs(wanted: readonly string[], execArgv: readonly string[]): string[] {
  const given = new Set(execArgv.map(optionName));
  return wanted.filter((arg) => !given.has(optionName(arg)));
}

/**
 * Replaces this process (execve: same pid, argv and environment) by node with the agent's options when
 * it was started without them, as `#!/usr/bin/env node` does. Returns when none is missing, which is
 * also the case in the process it starts, and on a Node without process.execve (before 22.15 and
 * 23.11), which runs the agent with the options it has.
 */
export function relaunchWithAgentNodeArgs(): void {
  const missing = missingNodeArgs(agentNodeArgs(), process.execArgv);
  if (!missing.length || !process.execve) return;
  process.execve(
    process.execPath,
    [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)],
    process.env,
  );
}
