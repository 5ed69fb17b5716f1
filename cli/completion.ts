/**
 * `peerops completion bash|zsh|fish`: a shell completion script (docs/cli.md, "Shell completion"), made
 * of static lists: commands, their actions, their flags. Nothing is asked of the controller while typing.
 */
import { ACTIONS as CONTEXT_ACTIONS } from './context.ts';
import { AREAS, OPTIONS as ADMIN_OPTIONS } from './admin.ts';
import { COMMON_OPTIONS, CliError, run, unknownWord } from './client.ts';
import { OPTIONS as LOGIN_OPTIONS } from './login.ts';
import { ACTIONS as SESSION_ACTIONS, OPTIONS as SESSION_OPTIONS } from './session.ts';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;

/** The commands a person types (bin/peerops.ts lists the same, with what each does). */
const COMMANDS = [
  'login',
  'session',
  'routers',
  'context',
  'admin',
  'serve',
  'validate',
  'agent',
  'completion',
  'version',
  'help',
];

const flags = (options: object): string[] => Object.keys(options).map((k) => `--${k}`);

const FLAGS: Record<string, string[]> = {
  session: flags(SESSION_OPTIONS),
  admin: flags(ADMIN_OPTIONS),
  login: flags(LOGIN_OPTIONS),
  routers: flags(COMMON_OPTIONS),
  context: ['--output', '--json', '--help'],
  validate: ['--base', '--format', '--help'],
  serve: ['--listen', '--data', '--help'],
};

const SUBCOMMANDS: Record<string, readonly string[]> = {
  session: SESSION_ACTIONS,
  context: CONTEXT_ACTIONS,
  admin: Object.keys(AREAS),
  completion: SHELLS,
};

const FORMATS = 'table wide json yaml';

function bash(): string {
  const caseOf = (m: Record<string, readonly string[]>, indent: string) =>
    Object.entries(m)
      .map(([k, v]) => `${indent}${k}) words="${v.join(' ')}" ;;`)
      .join('\n');
  return `# peerops bash completion: eval "$(peerops completion bash)"
_peerops() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local cmd="\${COMP_WORDS[1]}" words=""
  if [[ $COMP_CWORD -eq 1 ]]; then
    words="${COMMANDS.join(' ')}"
  elif [[ $prev == -o || $prev == --output ]]; then
    words="${FORMATS}"
  elif [[ $cur == -* ]]; then
    case "$cmd" in
${caseOf(FLAGS, '      ')}
    esac
  elif [[ $COMP_CWORD -eq 2 ]]; then
    case "$cmd" in
${caseOf(SUBCOMMANDS, '      ')}
    esac
  elif [[ $COMP_CWORD -eq 3 && $cmd == admin ]]; then
    case "\${COMP_WORDS[2]}" in
${caseOf(AREAS, '      ')}
    esac
  fi
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _peerops peerops
`;
}

function zsh(): string {
  // zsh runs bash completion functions through bashcompinit: one script to keep right, not two
  return `#compdef peerops
# peerops zsh completion: eval "$(peerops completion zsh)"
autoload -U +X bashcompinit && bashcompinit
${bash()}`;
}

function fish(): string {
  const lines = [
    '# peerops fish completion: peerops completion fish > ~/.config/fish/completions/peerops.fish',
    'complete -c peerops -f',
    `complete -c peerops -n __fish_use_subcommand -a '${COMMANDS.join(' ')}'`,
  ];
  for (const [cmd, subs] of Object.entries(SUBCOMMANDS))
    lines.push(
      `complete -c peerops -n '__fish_seen_subcommand_from ${cmd}; and not __fish_seen_subcommand_from ${subs.join(' ')}' -a '${subs.join(' ')}'`,
    );
  for (const [area, actions] of Object.entries(AREAS))
    if (actions.length)
      lines.push(
        `complete -c peerops -n '__fish_seen_subcommand_from admin; and __fish_seen_subcommand_from ${area}' -a '${actions.join(' ')}'`,
      );
  for (const [cmd, list] of Object.entries(FLAGS))
    for (const f of list)
      lines.push(
        `complete -c peerops -n '__fish_seen_subcommand_from ${cmd}' -l ${f.slice(2)}${f === '--output' ? ` -s o -r -a '${FORMATS}'` : ''}`,
      );
  return `${lines.join('\n')}\n`;
}

export async function main(argv: string[]): Promise<number> {
  return run(async () => {
    const [shell, extra] = argv;
    if (!shell || shell === '--help' || shell === '-h') {
      console.log(`usage: peerops completion bash|zsh|fish

  bash: eval "$(peerops completion bash)"   (e.g. in ~/.bashrc)
  zsh:  eval "$(peerops completion zsh)"    (e.g. in ~/.zshrc)
  fish: peerops completion fish > ~/.config/fish/completions/peerops.fish`);
      return shell ? 0 : 2;
    }
    if (extra !== undefined) throw new CliError('USAGE', `unexpected argument '${extra}'`);
    if (shell === 'bash') process.stdout.write(bash());
    else if (shell === 'zsh') process.stdout.write(zsh());
    else if (shell === 'fish') process.stdout.write(fish());
    else throw unknownWord('shell', shell, SHELLS);
    return 0;
  });
}
