/**
 * `peerops completion bash|zsh|fish`: a shell completion script (docs/cli.md, "Shell completion"):
 * commands, their actions and flags from static lists; session UUIDs, router names and contexts from
 * `peerops completion --words KIND`, which the script runs while typing.
 */
import { ACTIONS as CONTEXT_ACTIONS } from './context.ts';
import { AREAS, OPTIONS as ADMIN_OPTIONS } from './admin.ts';
import { Client, CliError, run, unknownWord } from './client.ts';
import { loadConfig } from './config.ts';
import { OPERATIONS as LG_OPERATIONS, OPTIONS as LG_OPTIONS } from './lg.ts';
import { OPTIONS as LOGIN_OPTIONS } from './login.ts';
import { ACTIONS as SESSION_ACTIONS, OPTIONS as SESSION_OPTIONS } from './session.ts';
import { OPTIONS as ROUTERS_OPTIONS } from './routers.ts';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;

/** The commands a person types (bin/peerops.ts lists the same, with what each does). */
const COMMANDS = [
  'login',
  'session',
  'routers',
  'lg',
  'context',
  'admin',
  'serve',
  'validate',
  'agent',
  'adopt',
  'completion',
  'version',
  'help',
];

const flags = (options: object): string[] => Object.keys(options).map((k) => `--${k}`);

const FLAGS: Record<string, string[]> = {
  session: flags(SESSION_OPTIONS),
  admin: flags(ADMIN_OPTIONS),
  login: flags(LOGIN_OPTIONS),
  routers: flags(ROUTERS_OPTIONS),
  lg: flags(LG_OPTIONS),
  context: ['--output', '--json', '--help'],
  validate: ['--base', '--format', '--help'],
  serve: ['--listen', '--data', '--help'],
  adopt: [
    '--router',
    '--wireguard-dir',
    '--networkd-dir',
    '--bird-conf',
    '--port-min',
    '--port-max',
    '--output',
    '--out',
    '--pull-request',
    '--forge',
    '--git-remote',
    '--git-branch',
    '--branch',
    '--files-only',
    '--apply',
    '--plan',
    '--url',
    '--token',
    '--context',
    '--help',
  ],
};

const SUBCOMMANDS: Record<string, readonly string[]> = {
  session: SESSION_ACTIONS,
  context: CONTEXT_ACTIONS,
  admin: Object.keys(AREAS),
  completion: SHELLS,
  lg: Object.keys(LG_OPERATIONS),
};

const FORMATS = 'table wide json yaml';

/** What `--words` lists: the current context's sessions and routers, and the saved contexts. */
const WORD_KINDS = ['sessions', 'routers', 'contexts'] as const;
type WordKind = (typeof WORD_KINDS)[number];

/** The actions whose argument is a session UUID, a router name or a context name. */
const TAKES_SESSION = ['show', 'modify', 'delete', 'restart', 'config', 'routes', 'protocol', 'history'];
const ADMIN_TAKES_SESSION = AREAS.session.filter((a) => a !== 'list');
const ADMIN_TAKES_ROUTER = AREAS.router.filter((a) => a !== 'list' && a !== 'add');
const TAKES_CONTEXT = CONTEXT_ACTIONS.filter((a) => a !== 'list');

/**
 * Seconds a completion may wait for the controller: a shell blocks while it runs, and a slow or absent
 * controller must cost a moment, not PEEROPS_TIMEOUT's 30 s.
 */
const WORDS_TIMEOUT = 2;

/** The candidates of one kind, one a line; nothing at all on any failure (a completion never prints errors). */
async function words(kind: WordKind): Promise<string[]> {
  if (kind === 'contexts') return (await loadConfig()).contexts.map((c) => c.name);
  const client = await Client.create({});
  if (kind === 'routers')
    return (await client.get<{ routers: { name: string }[] }>('/routers')).routers.map((r) => r.name);
  const { sessions } = await client.post<{ sessions: { uuid: string }[] }>('/session', { action: 'list' });
  return sessions.map((s) => s.uuid);
}

function bash(): string {
  const caseOf = (m: Record<string, readonly string[]>, indent: string) =>
    Object.entries(m)
      .map(([k, v]) => `${indent}${k}) words="${v.join(' ')}" ;;`)
      .join('\n');
  const alternatives = (list: readonly string[]) => `^(${list.join('|')})$`;
  return `# peerops bash completion: eval "$(peerops completion bash)"
_peerops_words() {
  PEEROPS_TIMEOUT=${WORDS_TIMEOUT} "\${COMP_WORDS[0]}" completion --words "$1" 2>/dev/null
}
_peerops() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}"
  local cmd="\${COMP_WORDS[1]}" sub="\${COMP_WORDS[2]}" action="\${COMP_WORDS[3]}" words=""
  if [[ $COMP_CWORD -eq 1 ]]; then
    words="${COMMANDS.join(' ')}"
  elif [[ $prev == -o || $prev == --output ]]; then
    words="${FORMATS}"
  elif [[ $prev == --router ]]; then
    words="$(_peerops_words routers)"
  elif [[ $prev == --context ]]; then
    words="$(_peerops_words contexts)"
  elif [[ $cur == -* ]]; then
    case "$cmd" in
${caseOf(FLAGS, '      ')}
    esac
  elif [[ $COMP_CWORD -eq 2 ]]; then
    case "$cmd" in
${caseOf(SUBCOMMANDS, '      ')}
    esac
  elif [[ $COMP_CWORD -eq 3 && $cmd == session && $sub =~ ${alternatives(TAKES_SESSION)} ]]; then
    words="$(_peerops_words sessions)"
  elif [[ $COMP_CWORD -eq 3 && $cmd == context && $sub =~ ${alternatives(TAKES_CONTEXT)} ]]; then
    words="$(_peerops_words contexts)"
  elif [[ $COMP_CWORD -eq 3 && $cmd == admin ]]; then
    case "$sub" in
${caseOf(AREAS, '      ')}
    esac
  elif [[ $COMP_CWORD -eq 4 && $cmd == admin && $sub == session && $action =~ ${alternatives(ADMIN_TAKES_SESSION)} ]]; then
    words="$(_peerops_words sessions)"
  elif [[ $COMP_CWORD -eq 4 && $cmd == admin && $sub == router && $action =~ ${alternatives(ADMIN_TAKES_ROUTER)} ]]; then
    words="$(_peerops_words routers)"
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
  const ask = (kind: WordKind) =>
    `(env PEEROPS_TIMEOUT=${WORDS_TIMEOUT} peerops completion --words ${kind} 2>/dev/null)`;
  lines.push(
    `complete -c peerops -n '__fish_seen_subcommand_from session; and __fish_seen_subcommand_from ${TAKES_SESSION.join(' ')}' -a '${ask('sessions')}'`,
    `complete -c peerops -n '__fish_seen_subcommand_from context; and __fish_seen_subcommand_from ${TAKES_CONTEXT.join(' ')}' -a '${ask('contexts')}'`,
    `complete -c peerops -n '__fish_seen_subcommand_from admin; and __fish_seen_subcommand_from ${ADMIN_TAKES_SESSION.join(' ')}' -a '${ask('sessions')}'`,
    `complete -c peerops -n '__fish_seen_subcommand_from admin; and __fish_seen_subcommand_from ${ADMIN_TAKES_ROUTER.join(' ')}' -a '${ask('routers')}'`,
    `complete -c peerops -l router -r -a '${ask('routers')}'`,
    `complete -c peerops -l context -r -a '${ask('contexts')}'`,
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
    if (shell === '--words') {
      const kind = WORD_KINDS.find((k) => k === extra);
      if (!kind) throw unknownWord('kind of words', extra ?? '', WORD_KINDS);
      // a completion that fails completes nothing: an error would be printed into the command line
      const list = await words(kind).catch(() => []);
      if (list.length) console.log(list.join('\n'));
      return 0;
    }
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
