/**
 * `peerops routers`: the routers one can peer with (the public GET /routers, no login needed).
 */
import { Client, COMMON_OPTIONS, CliError, output, outputFormat, parseFlags, run, table } from './client.ts';
import type { NearRoutersResponse, PublicRouter } from '../controller/api/responses.ts';

const USAGE = `usage: peerops routers [--near HOST:PORT] [-o table|wide|json|yaml] [--url URL] [--context NAME]

The routers you can peer with: their name (for session create --router), region, endpoint host, and
whether they accept new sessions; -o wide adds the WireGuard public key and link-local address.

--near HOST:PORT   the routers accepting sessions, nearest first: each pings your WireGuard endpoint's
                   host and the RTT it measured is shown (needs a login; measured again after 5 min)`;

export const OPTIONS = { ...COMMON_OPTIONS, near: { type: 'string' } } as const;

function nearTable(res: NearRoutersResponse): string {
  if (res.routers.length === 0) return 'no router accepts new sessions';
  return table(
    ['NAME', 'DISPLAY NAME', 'REGION', 'RTT MS', 'NOTE'],
    res.routers.map((r) => [r.name, r.displayName, r.region, r.rtt, r.problem]),
  );
}

export async function main(argv: string[]): Promise<number> {
  return run(async () => {
    const { values, positionals } = parseFlags(argv, OPTIONS);
    if (values.help) {
      console.log(USAGE);
      return 0;
    }
    if (positionals.length) throw new CliError('USAGE', `unexpected argument '${positionals[0]}'`);
    const format = outputFormat(values);
    const client = await Client.create({ url: values.url, token: values.token, context: values.context });
    if (values.near !== undefined) {
      const near = await client.get<NearRoutersResponse>(
        `/routers/near?endpoint=${encodeURIComponent(values.near)}`,
      );
      output(format, near, () => nearTable(near));
      return 0;
    }
    const res = await client.get<{ routers: PublicRouter[] }>('/routers');
    const yes = (r: PublicRouter) => (r.accepting ? 'yes' : 'no');
    output(
      format,
      res,
      () =>
        table(
          ['NAME', 'DISPLAY NAME', 'REGION', 'LOCATION', 'ENDPOINT HOST', 'ACCEPTING'],
          res.routers.map((r) => [r.name, r.displayName, r.region, r.location, r.endpointHost, yes(r)]),
        ),
      () =>
        table(
          [
            'NAME',
            'UUID',
            'DISPLAY NAME',
            'REGION',
            'LOCATION',
            'ENDPOINT HOST',
            'PUBLIC KEY',
            'LINK-LOCAL',
            'ACCEPTING',
          ],
          res.routers.map((r) => [
            r.name,
            r.uuid,
            r.displayName,
            r.region,
            r.location,
            r.endpointHost,
            r.publicKey,
            r.linkLocal,
            yes(r),
          ]),
        ),
    );
    return 0;
  });
}
