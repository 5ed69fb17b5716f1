/**
 * `peerops routers`: the routers one can peer with (the public GET /routers, no login needed).
 */
import { Client, COMMON_OPTIONS, CliError, output, outputFormat, parseFlags, run, table } from './client.ts';
import type { PublicRouter } from '../controller/api/responses.ts';

const USAGE = `usage: peerops routers [-o table|wide|json|yaml] [--url URL] [--context NAME]

The routers you can peer with: their name (for session create --router), region, endpoint host, and
whether they accept new sessions; -o wide adds the WireGuard public key and link-local address.`;

export async function main(argv: string[]): Promise<number> {
  return run(async () => {
    const { values, positionals } = parseFlags(argv, COMMON_OPTIONS);
    if (values.help) {
      console.log(USAGE);
      return 0;
    }
    if (positionals.length) throw new CliError('USAGE', `unexpected argument '${positionals[0]}'`);
    const format = outputFormat(values);
    const client = await Client.create({ url: values.url, token: values.token, context: values.context });
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
