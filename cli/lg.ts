/**
 * `peerops lg ping|trace|route ROUTER TARGET`: the looking glass (POST /lg, docs/cli.md). The router's
 * agent runs the query and the output is printed as the router printed it.
 */
import type { LgAnswer } from '../common/looking-glass.ts';
import {
  CliError,
  Client,
  COMMON_OPTIONS,
  output,
  outputFormat,
  parseFlags,
  run,
  unknownWord,
} from './client.ts';

const USAGE = `usage: peerops lg <operation> ROUTER TARGET [--session UUID]

  ping ROUTER ADDRESS            ping the address from the router
  trace ROUTER ADDRESS           traceroute (mtr where installed) from the router to the address
  route ROUTER ADDRESS|PREFIX    BIRD's routes for it on the router (show route for … all);
                                 --session UUID: only those learned from that session of yours

Peers ask about addresses in DN42's ranges (fd00::/8, 172.20.0.0/14, 172.31.0.0/16, 10.0.0.0/8); admins
about any. Each query runs at most 10 s and prints at most 256 KiB on the router.

common: --url URL (or PEEROPS_URL), --context NAME (or PEEROPS_CONTEXT), --token TOKEN, -o json|yaml`;

/** The words a person types, and the API operation of each. */
export const OPERATIONS = { ping: 'ping', trace: 'traceroute', route: 'route' } as const;

export const OPTIONS = { ...COMMON_OPTIONS, session: { type: 'string' } } as const;

/** The answer's text, with a last line saying where a bound cut it. */
export function lgText(answer: LgAnswer): string {
  const notes = [
    answer.timedOut ? '(stopped at the 10 s bound)' : '',
    answer.truncated ? '(output cut at its bound)' : '',
    answer.page
      ? `(routes ${Math.min(answer.page.offset + 1, answer.page.total)}-${Math.min(answer.page.offset + answer.page.limit, answer.page.total)} of ${answer.page.total})`
      : '',
  ].filter(Boolean);
  // routes: one line per route with the filter's verdict and ROA state, then BIRD's text of them
  const summary = (answer.routes ?? [])
    .map((r) => `${r.verdict.padEnd(9)} ROA ${r.roa.padEnd(8)} ${r.net}`)
    .join('\n');
  return [summary && `${summary}\n`, answer.output.trimEnd(), ...notes].filter(Boolean).join('\n');
}

export async function main(argv: string[]): Promise<number> {
  return run(async () => {
    const { values, positionals } = parseFlags(argv, OPTIONS);
    const [word, router, target, extra] = positionals;
    if (values.help || !word) {
      console.log(USAGE);
      return values.help ? 0 : 2;
    }
    const op = OPERATIONS[word as keyof typeof OPERATIONS] as
      (typeof OPERATIONS)[keyof typeof OPERATIONS] | undefined;
    if (!op) throw unknownWord('looking-glass operation', word, Object.keys(OPERATIONS));
    if (!router || !target) throw new CliError('USAGE', `lg ${word} needs ROUTER and TARGET`);
    if (extra !== undefined) throw new CliError('USAGE', `unexpected argument '${extra}'`);
    if (values.session !== undefined && op !== 'route')
      throw new CliError('USAGE', '--session goes with route only');
    const format = outputFormat(values);
    const client = await Client.create({ url: values.url, token: values.token, context: values.context });
    const answer = await client.post<LgAnswer>('/lg', {
      op,
      router,
      target,
      ...(values.session !== undefined ? { session: values.session } : {}),
    });
    output(format, answer, () => lgText(answer));
    return answer.exitCode !== undefined && answer.exitCode !== 0 ? 1 : 0;
  });
}
