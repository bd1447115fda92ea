// OpenTelemetry for polish processes: traces are exported over OTLP/HTTP only when an endpoint
// is configured; otherwise nothing is loaded, registered or sent. The SDK lives in
// telemetry-sdk.ts and is imported dynamically, so a process without the variables never loads
// it (a single-use worker does not pay its boot time).

/** A started (or deliberately not started) telemetry pipeline. */
export interface Telemetry {
  /** True when an SDK was registered and spans are exported. */
  readonly enabled: boolean;
  /** Exports the spans still buffered, then stops. Call it before the process exits; never throws. */
  shutdown(): Promise<void>;
}

const DISABLED: Telemetry = Object.freeze({ enabled: false, shutdown: () => Promise.resolve() });

/**
 * Whether traces are to be exported: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and neither `OTEL_SDK_DISABLED=true` nor
 * `OTEL_TRACES_EXPORTER=none` says otherwise.
 */
export function telemetryConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporters =
    env.OTEL_TRACES_EXPORTER?.split(',')
      .map((name) => name.trim().toLowerCase())
      .filter(Boolean) ?? [];
  if (exporters.length > 0 && exporters.every((name) => name === 'none')) return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim());
}

/**
 * Registers a tracer provider (batching OTLP/HTTP JSON exporter), the W3C trace-context
 * propagator and an AsyncLocalStorage context manager, when {@link telemetryConfigured};
 * otherwise does nothing and the `@opentelemetry/api` calls of polish stay no-ops.
 * `serviceName` names this process unless `OTEL_SERVICE_NAME` does. Never throws: a setup that
 * fails leaves tracing off, with one line on stderr.
 */
export async function startTelemetry(serviceName: string, env: NodeJS.ProcessEnv = process.env): Promise<Telemetry> {
  if (!telemetryConfigured(env)) return DISABLED;
  try {
    const { startSdk } = await import('./telemetry-sdk.js');
    return startSdk(serviceName, env) ?? DISABLED;
  } catch (error) {
    // Tracing is an aid: a broken setup must not stop a run or a worker.
    process.stderr.write(`polish: tracing is off: ${(error as Error).message}\n`);
    return DISABLED;
  }
}
