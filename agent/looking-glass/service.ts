/**
 * The agent's side of the looking glass (docs/agent.md, Looking glass): a long poll to the controller
 * beside the sessions poll (GET /agent/:router/lg), each query taken run at once within its bounds and
 * its answer posted back. The router opens no port: the controller only answers the agent's requests.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { LgAnswer, LgQuery } from '../../common/looking-glass.ts';
import { oneLine } from '../../common/text.ts';
import type { BirdControl } from '../bird/control.ts';
import type { ControlPlaneClient } from '../sync/client.ts';
import { answerQuery, type ProtocolsOf } from './queries.ts';

/** Seconds the controller holds each poll: well inside a proxy's idle timeout. */
const LG_POLL_S = 25;

export class LookingGlassService {
  private readonly client: Pick<ControlPlaneClient, 'lgQueries' | 'lgAnswer' | 'failureDelay'>;
  private readonly bird: BirdControl;
  private readonly log: Logger;
  private readonly protocolsOf: ProtocolsOf | undefined;

  /** `protocolsOf`: the BIRD protocols of the session on a port, as the agent's sessions say. */
  constructor(
    client: Pick<ControlPlaneClient, 'lgQueries' | 'lgAnswer' | 'failureDelay'>,
    bird: BirdControl,
    log: Logger,
    protocolsOf?: ProtocolsOf,
  ) {
    this.client = client;
    this.bird = bird;
    this.log = log;
    this.protocolsOf = protocolsOf;
  }

  /** Polls until `signal` aborts; a failed poll waits as the sync loop does (backoff with jitter). */
  async run(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      try {
        const queries = await this.client.lgQueries(LG_POLL_S, signal);
        failures = 0;
        // the controller runs at most a few per router at once (controller/looking-glass/broker.ts)
        for (const query of queries) void this.serve(query);
      } catch (err) {
        if (signal.aborted) break;
        this.log.debug({ err: (err as Error).message }, 'looking-glass poll failed; retrying');
        await sleep(this.client.failureDelay(failures++), undefined, { signal }).catch(() => undefined);
      }
    }
  }

  private async serve(query: LgQuery): Promise<void> {
    const started = Date.now();
    let answer: LgAnswer;
    try {
      answer = await answerQuery(query, this.bird, undefined, this.protocolsOf);
    } catch (err) {
      answer = {
        output: `error: ${oneLine((err as Error).message, 2000)}`,
        truncated: false,
        timedOut: false,
      };
    }
    this.log.info(
      { lg: { id: query.id, op: query.op, target: query.target, listenPort: query.listenPort } },
      `looking-glass query answered in ${Date.now() - started} ms`,
    );
    await this.client
      .lgAnswer(query.id, answer)
      .catch((err: Error) => this.log.warn({ err: err.message }, 'looking-glass answer not delivered'));
  }
}
