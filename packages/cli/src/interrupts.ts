const log = (line: string) => process.stderr.write(`${line}\n`);

/**
 * Turns Ctrl-C and SIGTERM into an abort of the returned signal until `dispose` is called.
 * Listening (not once) until everything is stopped: a second Ctrl-C must not kill polish
 * before it has stopped the nats-server and workers it started.
 */
export function abortOnInterrupt(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const cancel = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) log(`polish: ${signal} again: stopping now`);
    else controller.abort(`interrupted by ${signal}`);
  };
  process.on('SIGINT', cancel);
  process.on('SIGTERM', cancel);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', cancel);
      process.off('SIGTERM', cancel);
    },
  };
}
