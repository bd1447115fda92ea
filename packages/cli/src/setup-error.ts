/** polish could not start what a run needs (nats-server missing, NATS unreachable): exit 6. */
export class SetupError extends Error {
  override readonly name = 'SetupError';
}
