// The NATS client of a worker, loaded by a dynamic import: it then loads while the model is being
// made instead of before any worker code runs, and it stays out of a startup snapshot of the
// worker's code (node:tls, which it needs, cannot be in one).

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
  };
}

export type NatsClient = Awaited<ReturnType<typeof loadNatsClient>>;
