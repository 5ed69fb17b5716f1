#!/usr/bin/env node
/**
 * The one executable: `peerops <command> …`. Each command lives in its own module, loaded on demand so
 * that `peerops agent` never loads the controller and vice versa. Every module exports
 * `main(argv: string[]): Promise<number>` returning the exit status.
 */
import { relaunchWithAgentNodeArgs } from '../agent/node-args.ts';
import { usageError } from '../common/usage.ts';

/** `internal`: run by a program, not a person (git runs `hook`), so left out of the help. */
const commands: Record<string, { module: string; summary: string; internal?: boolean }> = {
  serve: { module: '../controller/main.ts', summary: 'run the controller (REST API, store, reconciler)' },
  agent: { module: '../agent/main.ts', summary: 'run the router agent' },
  adopt: { module: '../agent/adopt/main.ts', summary: "plan taking over a router's hand-made peers" },
  validate: { module: '../cli/validate.ts', summary: 'check a GitOps repository checkout of manifests' },
  login: { module: '../cli/login.ts', summary: 'log in by signing a challenge with an SSH or PGP key' },
  session: {
    module: '../cli/session.ts',
    summary: 'list, show, create, modify, delete, restart your sessions',
  },
  routers: { module: '../cli/routers.ts', summary: 'the routers you can peer with' },
  lg: { module: '../cli/lg.ts', summary: 'looking glass: ping, trace, route from a router' },
  context: {
    module: '../cli/context.ts',
    summary: 'list, use, remove saved logins (URL and token per network)',
  },
  admin: { module: '../cli/admin.ts', summary: 'admin actions: sessions, routers, policy, tokens' },
  completion: { module: '../cli/completion.ts', summary: 'print a bash, zsh or fish completion script' },
  hook: {
    module: '../controller/store/git/pre-receive.ts',
    summary: "git's pre-receive hook in the store's repository (docs/gitops.md)",
    internal: true,
  },
};

/** What `peerops` takes besides a command. */
const TOP_LEVEL_WORDS = ['--version', 'version', '--help', 'help'];

function usage(): string {
  const lines = Object.entries(commands)
    .filter(([, c]) => !c.internal)
    .map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`);
  return `usage: peerops <command> [options]\n\ncommands:\n${lines.join('\n')}\n\n'peerops help <command>' (or 'peerops <command> --help') for a command's options.`;
}

/**
 * The oldest Node each part runs on, measured with the npm package (test/package/install.test.ts):
 * crypto.hash came in 20.12; the Kubernetes client's HTTP library (undici 8) does not load before 22.19.
 */
const NODE_MIN = [20, 12] as const;
const NODE_MIN_KUBERNETES = [22, 19] as const;

function nodeBelow([major, minor]: readonly [number, number]): boolean {
  const [m = 0, n = 0] = process.versions.node.split('.').map(Number);
  return m < major || (m === major && n < minor);
}

/** Why this Node cannot run the command, or undefined when it can. */
function unsupportedNode(name: string | undefined): string | undefined {
  if (nodeBelow(NODE_MIN)) return `peerops needs Node >= ${NODE_MIN.join('.')}; this is ${process.version}`;
  if (name === 'serve' && process.env.PEEROPS_STORE === 'kubernetes' && nodeBelow(NODE_MIN_KUBERNETES))
    return `peerops serve with the Kubernetes store needs Node >= ${NODE_MIN_KUBERNETES.join('.')}; this is ${process.version} (the git store runs on it)`;
  return undefined;
}

async function run(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const unsupported = unsupportedNode(name);
  if (unsupported) {
    console.error(unsupported);
    return 1;
  }
  if (name === '--version' || name === 'version') {
    const { VERSION } = await import('../common/version.ts');
    console.log(VERSION);
    return 0;
  }
  if (!name || name === '--help' || name === '-h' || (name === 'help' && rest.length === 0)) {
    console.log(usage());
    return name ? 0 : 2;
  }
  // `help session` is `session --help`: that command's own usage (docs/cli.md)
  const [commandName, args] = name === 'help' ? [rest[0] ?? '', ['--help']] : [name, rest];
  const command = commands[commandName];
  if (!command) {
    // the nearest command or top-level option within 2 edits (docs/cli.md, "Errors and exit status")
    const { didYouMean } = await import('../cli/client.ts');
    const known = [...Object.keys(commands).filter((c) => !commands[c]?.internal), ...TOP_LEVEL_WORDS];
    const hint = didYouMean(commandName, known);
    const what = commandName.startsWith('-') ? 'option' : 'command';
    return usageError(`unknown ${what} '${commandName}'${hint || `\n\n${usage()}`}`);
  }
  const mod = (await import(command.module)) as { main(argv: string[]): Promise<number> };
  return mod.main(args);
}

const argv = process.argv.slice(2);
// The agent's Node options (agent/node-args.ts) on node's command line: this process is replaced when
// node was started without them. Here, not in run(): tests run commands in-process through main().
if (argv[0] === 'agent') relaunchWithAgentNodeArgs();
process.exitCode = await run(argv);
