import { once } from 'node:events';
import {
  createNatsStatelyInspector,
  createStatelySkyInspector,
  startInspector,
  type Inspector,
} from '@polish/inspector';
import { unavailable, invalidInput, eventsSubject, type RunEvent } from '@polish/protocol';
import type { InspectionEvent, Observer } from 'xstate';
import type { Runtime } from './runtime.js';
import { parseWholeNumber } from './numbers.js';
import { natsConnectOptions } from '@polish/agents';

const log = (line: string) => process.stderr.write(`${line}\n`);

/** `--inspect [local|stately]` and `--inspect-port`, validated. */
export interface InspectFlags {
  inspect?: string | boolean;
  inspectPort?: string;
}

export type InspectMode = 'local' | 'stately' | undefined;

export function inspectModeOf(flags: InspectFlags): InspectMode {
  if (flags.inspect === undefined || flags.inspect === false) return undefined;
  if (flags.inspect === true || flags.inspect === 'local') return 'local';
  if (flags.inspect === 'stately') return 'stately';
  throw invalidInput(
    'inspect',
    `"${flags.inspect}" is not an inspector: --inspect (the local page) or --inspect stately`,
  );
}

/** What a run is observed with: its events go to NATS, its actors to the inspection feed. */
export interface RunInspection {
  onEvent: (event: RunEvent) => void;
  inspect: Observer<InspectionEvent>;
  /** With the local page: keep it open until Ctrl-C, then close it. */
  finish(): Promise<void>;
}

/**
 * Observes a run: every event is published on `polish.v1.events.<runId>` (so `polish inspect`
 * anywhere on this NATS sees it, and the event stream keeps it), and every actor reports in the
 * @statelyai/inspect format on `polish.v1.inspect.<runId>`. `--inspect` also starts the local
 * page first (it creates the event stream, so the run can be replayed), `--inspect stately`
 * feeds Stately's hosted inspector instead (online only).
 */
export async function observeRun(
  runtime: Runtime,
  runId: string,
  mode: InspectMode,
  flags: InspectFlags & { waitForViewerMs?: number },
  signal?: AbortSignal,
): Promise<RunInspection> {
  let inspector: Inspector | undefined;
  if (mode === 'local') {
    const port = parseWholeNumber('inspect-port', flags.inspectPort, 0, 65535) ?? 4800;
    inspector = await startInspector({
      natsUrl: runtime.natsUrl,
      port,
      auth: natsConnectOptions(runtime.natsUrl, runtime.credentials?.inspector),
    }).catch((error: Error) => {
      throw unavailable(`cannot start the inspector: ${error.message}`);
    });
    log(`polish: inspector: open ${inspector.url} to watch the run`);
    if (flags.waitForViewerMs) {
      log(`polish: the run starts when the page is open (or in ${Math.round(flags.waitForViewerMs / 1000)} s)`);
      await Promise.race([
        inspector.viewerConnected(flags.waitForViewerMs),
        ...(signal ? [once(signal, 'abort')] : []),
      ]);
    }
  }
  const sky =
    mode === 'stately'
      ? createStatelySkyInspector((error) => log(`polish: stately inspector: ${error.message}`))
      : undefined;
  const feed = sky ?? createNatsStatelyInspector(runtime.connection, runId);
  const subject = eventsSubject(runId);
  return {
    onEvent: (event) => {
      if (runtime.connection.isClosed() || runtime.connection.isDraining()) return;
      try {
        runtime.connection.publish(subject, JSON.stringify(event));
      } catch (error) {
        // Observing a run never fails it (say an event over the server's max_payload).
        log(`polish: could not publish a ${event.type} event: ${(error as Error).message}`);
      }
    },
    inspect: feed.inspect,
    async finish() {
      sky?.stop();
      if (!inspector) return;
      if (!signal?.aborted) {
        await runtime.connection.flush().catch(() => undefined);
        log(`polish: the run is over; the inspector stays on ${inspector.url} (replay it there) until Ctrl-C`);
        await Promise.race([once(process, 'SIGINT'), once(process, 'SIGTERM')]);
      }
      await inspector.close();
    },
  };
}
