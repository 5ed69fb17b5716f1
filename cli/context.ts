/**
 * `peerops context list|use NAME|remove NAME`: the saved contexts (cli/config.ts; docs/cli.md,
 * "Contexts"), as `kubectl config get-contexts|use-context|delete-context` and `gh auth switch` do.
 */
import { createDecoder } from 'fast-jwt';
import { CliError, output, outputFormat, parseFlags, run, table, unknownWord } from './client.ts';
import { loadConfig, saveConfig } from './config.ts';

export const ACTIONS = ['list', 'use', 'remove'] as const;

const USAGE = `usage: peerops context <action> [options]

  list [-o table|wide|json|yaml]   the saved contexts; * marks the current one
  use NAME                         make NAME the current context
  remove NAME                      forget NAME (its token too)

peerops login and peerops admin token --save add contexts. PEEROPS_CONTEXT or --context NAME on a
command use another context for that command only.`;

const OPTIONS = {
  json: { type: 'boolean' },
  output: { type: 'string', short: 'o' },
  help: { type: 'boolean', short: 'h' },
} as const;

const decode = createDecoder();

/** Who and until when a saved token is for, read without verifying it (only to show it). */
function tokenInfo(token: string | undefined): { asn?: number; role?: string; expiresAt?: string } {
  if (!token) return {};
  try {
    const c = decode(token) as { asn?: unknown; role?: unknown; exp?: unknown };
    return {
      ...(typeof c.asn === 'number' ? { asn: c.asn } : {}),
      ...(typeof c.role === 'string' ? { role: c.role } : {}),
      ...(typeof c.exp === 'number' ? { expiresAt: new Date(c.exp * 1000).toISOString() } : {}),
    };
  } catch {
    return {};
  }
}

export async function main(argv: string[]): Promise<number> {
  return run(async () => {
    const { values, positionals } = parseFlags(argv, OPTIONS);
    const [action, name, extra] = positionals;
    if (values.help || !action) {
      console.log(USAGE);
      return values.help ? 0 : 2;
    }
    if (!(ACTIONS as readonly string[]).includes(action))
      throw unknownWord('context action', action, ACTIONS);
    if (extra !== undefined) throw new CliError('USAGE', `unexpected argument '${extra}'`);
    const format = outputFormat(values);
    const config = await loadConfig();
    if (action === 'list') {
      // the tokens stay out of what is printed: a listing gets pasted into issues
      const contexts = config.contexts.map((c) => ({
        name: c.name,
        current: c.name === config.currentContext,
        url: c.url,
        ...tokenInfo(c.token),
      }));
      output(
        format,
        { currentContext: config.currentContext ?? null, contexts },
        () =>
          contexts.length === 0
            ? 'no contexts: peerops login saves one'
            : table(
                ['CURRENT', 'NAME', 'URL', 'ROLE'],
                contexts.map((c) => [c.current ? '*' : '', c.name, c.url, c.role]),
              ),
        () =>
          table(
            ['CURRENT', 'NAME', 'URL', 'ASN', 'ROLE', 'EXPIRES'],
            contexts.map((c) => [c.current ? '*' : '', c.name, c.url, c.asn, c.role, c.expiresAt]),
          ),
      );
      return 0;
    }
    if (!name) throw new CliError('USAGE', `context ${action} needs the context NAME`);
    const found = config.contexts.find((c) => c.name === name);
    if (!found)
      throw unknownWord(
        'context',
        name,
        config.contexts.map((c) => c.name),
      );
    if (action === 'use') {
      config.currentContext = name;
      await saveConfig(config);
      console.log(`current context: ${name} (${found.url})`);
      return 0;
    }
    config.contexts = config.contexts.filter((c) => c.name !== name);
    if (config.currentContext === name) delete config.currentContext;
    await saveConfig(config);
    console.log(
      `context ${name} removed${config.currentContext === undefined ? '; no context is current now (peerops context use NAME)' : ''}`,
    );
    return 0;
  });
}
