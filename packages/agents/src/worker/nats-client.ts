// The NATS client of a worker, loaded by a dynamic import: it then loads while the model is being
// made instead of before any worker code runs. In the worker's startup snapshot it is loaded at
// build time instead (snapshot-entry.ts).

/** Loads the NATS client modules a worker uses. */
export async function loadNatsClient() {
  const [transport, jetstreamModule] = await Promise.all([
    import('@nats-io/transport-node'),
    import('@nats-io/jetstream'),
  ]);
  return {
    connect: transport.connect,
    createInbox: transport.createInbox,
    nkeyAuthenticator: transport.nkeyAuthenticator,
    jetstream: jetstreamModule.jetstream,
    /** The generator of inbox names: a worker restored from a snapshot draws a new prefix for it. */
    nuid: transport.nuid,
  };
}

export type NatsClient = Awaited<ReturnType<typeof loadNatsClient>>;
