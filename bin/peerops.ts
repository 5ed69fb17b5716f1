#!/usr/bin/env node
/**
 * The one executable: `peerops <command> …`. Each command lives in its own module, loaded on demand so
 * that `peerops agent` never loads the controller and vice versa. Every module exports
 * `main(argv: string[]): Promise<number>` returning the exit status.
 */
import { usageError } from '../common/usage.ts';

const commands: Record<string, { module: string; summary: string }> = {
  serve: { module: '../controller/main.ts', summary: 'run the controller (REST API, store, reconciler)' },
  agent: { module: '../agent/main.ts', summary: 'run the router agent' },
  validate: { module: '../cli/validate.ts', summary: 'check a GitOps repository checkout of manifests' },
  login: { module: '../cli/login.ts', summary: 'log in by signing a challenge with an SSH or PGP key' },
  session: { module: '../cli/session.ts', summary: 'list, create, modify, delete, restart your sessions' },
  admin: { module: '../cli/admin.ts', summary: 'admin actions: sessions, routers, policy, tokens' },
};

function usage(): string {
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`);
  return `usage: peerops <command> [options]\n\ncommands:\n${lines.join('\n')}\n\n'peerops <command> --help' for a command's options.`;
}

async function run(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === 'version') {
    const { VERSION } = await import('../common/version.ts');
    console.log(VERSION);
    return 0;
  }
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return name ? 0 : 2;
  }
  const command = commands[name];
  if (!command) {
    return usageError(`unknown command '${name}'\n\n${usage()}`);
  }
  const mod = (await import(command.module)) as { main(argv: string[]): Promise<number> };
  return mod.main(rest);
}

process.exitCode = await run(process.argv.slice(2));
