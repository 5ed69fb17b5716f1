/**
 * Runs the system tools the agent drives (ip, wg, wireguard-go, ping, bird). With
 * `PEEROPS_AGENT_NETNS=<name>` every command runs inside that network namespace (`ip netns exec`): the
 * integration tests run the agent against a namespace that stands for the router, and a host that runs
 * its routing in a namespace can do the same. Arguments go to execve as a list: no shell, no quoting.
 */
import { spawn } from 'node:child_process';

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export class CommandError extends Error {
  readonly result: CommandResult;
  constructor(command: string, result: CommandResult) {
    super(
      `${command} failed (exit ${result.code}): ${(result.stderr || result.stdout).trim().slice(0, 2000)}`,
    );
    this.name = 'CommandError';
    this.result = result;
  }
}

/** The namespace commands run in, or undefined for the agent's own. */
export function commandNamespace(): string | undefined {
  return process.env.PEEROPS_AGENT_NETNS || undefined;
}

/** The program and arguments that run `cmd` in the commands' namespace (commandNamespace). */
export function wrap(cmd: string, args: readonly string[]): [string, string[]] {
  const ns = commandNamespace();
  return ns ? ['ip', ['netns', 'exec', ns, cmd, ...args]] : [cmd, [...args]];
}

export interface RunOptions {
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
  /**
   * For a command that daemonizes (wireguard-go): its output goes to this file descriptor, never to a
   * pipe, because the daemon keeps writing to it after the command returns. stdout/stderr stay empty.
   */
  outputFd?: number;
  /** Written to the command's stdin (`ip -batch -`); without it stdin is /dev/null. */
  input?: string;
}

/** Runs a command to completion; a non-zero exit is a result, not an exception. */
export function run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<CommandResult> {
  const [file, argv] = wrap(cmd, args);
  return new Promise((resolve, reject) => {
    const stdin = opts.input === undefined ? 'ignore' : 'pipe';
    const child = spawn(file, argv, {
      stdio: opts.outputFd === undefined ? [stdin, 'pipe', 'pipe'] : [stdin, opts.outputFd, opts.outputFd],
      env: opts.env ? { ...process.env, ...opts.env } : process.env,
    });
    if (child.stdin) {
      child.stdin.on('error', () => undefined); // a command that exits without reading all of it
      child.stdin.end(opts.input);
    }
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    const finish = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);

      resolve({ code: code ?? (signal ? 128 : -1), stdout, stderr });
    };
    child.on('close', finish);
  });
}

/** Runs a command and throws CommandError (with its stderr) unless it exits 0; resolves with stdout. */
export async function runOk(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<string> {
  const result = await run(cmd, args, opts);
  if (result.code !== 0) throw new CommandError(`${cmd} ${args.join(' ')}`, result);
  return result.stdout;
}
