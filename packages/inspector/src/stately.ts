import type { NatsConnection } from '@nats-io/transport-node';
import { createInspector, createSkyInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import type { InspectionEvent, Observer } from 'xstate';
import { DEFAULT_SUBJECT_PREFIX, inspectSubject } from '@polish/protocol';

/** What polish needs of an inspector: the observer to pass to `createActor`. */
export interface InspectObserver {
  inspect: Observer<InspectionEvent>;
}

/**
 * An XState inspection observer that publishes every inspection event of a run, in the
 * @statelyai/inspect format (`@xstate.actor`, `@xstate.event`, `@xstate.snapshot`), on
 * `polish.v1.inspect.<runId>`: any tool that speaks that format can follow the run from NATS.
 */
export function createNatsStatelyInspector(
  connection: NatsConnection,
  runId: string,
  prefix = DEFAULT_SUBJECT_PREFIX,
): InspectObserver {
  const subject = inspectSubject(runId, prefix);
  return createInspector({
    // @statelyai/inspect sends later (on an idle timer): by then the run may be over and its
    // connection draining, and an inspection event is not worth failing anything for.
    send: (event: StatelyInspectionEvent) => {
      if (connection.isClosed() || connection.isDraining()) return;
      try {
        connection.publish(subject, JSON.stringify(event));
      } catch {
        // Dropped: inspection only.
      }
    },
  });
}

/**
 * `polish run --inspect stately`: Stately's hosted inspector (needs the internet, which polish
 * itself never does). The URL to open is printed by @statelyai/inspect.
 */
export function createStatelySkyInspector(onError: (error: Error) => void): InspectObserver & { stop(): void } {
  // @statelyai/inspect prints its URL with console.log: to stderr here, so stdout stays the result.
  const log = console.log;
  console.log = (...args: unknown[]) => console.error(...args);
  try {
    const inspector = createSkyInspector({ onerror: onError });
    return { inspect: inspector.inspect, stop: () => inspector.stop() };
  } finally {
    console.log = log;
  }
}
