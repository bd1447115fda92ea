// The OpenTelemetry SDK setup, loaded only when an OTLP endpoint is configured (see telemetry.ts).
import { AsyncLocalStorage } from 'node:async_hooks';
import { hostname } from 'node:os';
import {
  ROOT_CONTEXT,
  DiagLogLevel,
  context,
  createTraceState,
  diag,
  isSpanContextValid,
  propagation,
  trace,
  type Attributes,
  type Context,
  type ContextManager,
  type SpanContext,
  type TextMapGetter,
  type TextMapPropagator,
  type TextMapSetter,
} from '@opentelemetry/api';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import type { Telemetry } from './telemetry.js';

type Resource = NonNullable<NonNullable<ConstructorParameters<typeof BasicTracerProvider>[0]>['resource']>;

/**
 * Carries the active context across `await`s, timers and callbacks of this process (what
 * `@opentelemetry/context-async-hooks` does, without another dependency).
 */
class AsyncLocalStorageContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    active: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(active, () => fn.apply(thisArg, args));
  }

  bind<T>(active: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const run = (self: unknown, args: unknown[]) =>
      this.with(active, () => (target as (...args: unknown[]) => unknown).apply(self, args));
    return function bound(this: unknown, ...args: unknown[]) {
      return run(this, args);
    } as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.storage.disable();
    return this;
  }
}

const TRACEPARENT = 'traceparent';
const TRACESTATE = 'tracestate';
const TRACEPARENT_PATTERN = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The W3C Trace Context propagator (`traceparent`, `tracestate`): https://www.w3.org/TR/trace-context/ */
class W3CTraceContextPropagator implements TextMapPropagator {
  inject(active: Context, carrier: unknown, setter: TextMapSetter): void {
    const span = trace.getSpanContext(active);
    if (!span || !isSpanContextValid(span)) return;
    setter.set(
      carrier,
      TRACEPARENT,
      `00-${span.traceId}-${span.spanId}-${(span.traceFlags & 0xff).toString(16).padStart(2, '0')}`,
    );
    const state = span.traceState?.serialize();
    if (state) setter.set(carrier, TRACESTATE, state);
  }

  extract(active: Context, carrier: unknown, getter: TextMapGetter): Context {
    const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);
    const header = first(getter.get(carrier, TRACEPARENT))?.trim();
    const match = header ? TRACEPARENT_PATTERN.exec(header) : null;
    if (!match) return active;
    const [, version, traceId, spanId, flags, rest] = match;
    // Version ff is invalid; version 00 has no further fields (later versions may add some).
    if (version === 'ff' || (version === '00' && rest)) return active;
    const state = first(getter.get(carrier, TRACESTATE));
    const span: SpanContext = {
      traceId: traceId!,
      spanId: spanId!,
      traceFlags: Number.parseInt(flags!, 16),
      isRemote: true,
      ...(state ? { traceState: createTraceState(state) } : {}),
    };
    return isSpanContextValid(span) ? trace.setSpanContext(active, span) : active;
  }

  fields(): string[] {
    return [TRACEPARENT, TRACESTATE];
  }
}

/** `OTEL_RESOURCE_ATTRIBUTES`: `key1=value1,key2=value2`, values percent-encoded. */
function resourceAttributesFromEnv(raw: string | undefined): Attributes {
  const attributes: Attributes = {};
  for (const pair of raw?.split(',') ?? []) {
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    try {
      attributes[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      // A malformed pair is ignored, as the specification asks.
    }
  }
  return attributes;
}

/** A resource with fixed attributes (`@opentelemetry/resources` is not a dependency of polish). */
function fixedResource(attributes: Attributes): Resource {
  return {
    attributes,
    asyncAttributesPending: false,
    getRawAttributes: () => Object.entries(attributes),
    merge(other) {
      return other ? fixedResource({ ...attributes, ...other.attributes }) : this;
    },
  };
}

/** OTEL_LOG_LEVEL set: the SDK's own problems (say, an unreachable collector) go to stderr, never stdout. */
function logDiagnostics(level: string | undefined): void {
  const levels: Record<string, DiagLogLevel> = {
    none: DiagLogLevel.NONE,
    error: DiagLogLevel.ERROR,
    warn: DiagLogLevel.WARN,
    info: DiagLogLevel.INFO,
    debug: DiagLogLevel.DEBUG,
    verbose: DiagLogLevel.VERBOSE,
    all: DiagLogLevel.ALL,
  };
  const chosen = level ? levels[level.trim().toLowerCase()] : undefined;
  if (chosen === undefined || chosen === DiagLogLevel.NONE) return;
  const write =
    (kind: string) =>
    (message: string, ...args: unknown[]) =>
      void process.stderr.write(
        `opentelemetry ${kind} (pid ${process.pid}): ${[message, ...args.map((arg) => (arg instanceof Error ? arg.message : String(arg)))].join(' ')}\n`,
      );
  diag.setLogger(
    {
      error: write('error'),
      warn: write('warn'),
      info: write('info'),
      debug: write('debug'),
      verbose: write('verbose'),
    },
    chosen,
  );
}

/**
 * Registers the SDK globally. Returns undefined when another tracer provider is already
 * registered in this process (it is left alone).
 */
export function startSdk(serviceName: string, env: NodeJS.ProcessEnv): Telemetry | undefined {
  logDiagnostics(env.OTEL_LOG_LEVEL);
  const resource = fixedResource({
    'service.name': serviceName,
    'host.name': hostname(),
    'process.pid': process.pid,
    'process.runtime.name': 'nodejs',
    'process.runtime.version': process.versions.node,
    'telemetry.sdk.language': 'nodejs',
    'telemetry.sdk.name': 'opentelemetry',
    ...resourceAttributesFromEnv(env.OTEL_RESOURCE_ATTRIBUTES),
    ...(env.OTEL_SERVICE_NAME?.trim() ? { 'service.name': env.OTEL_SERVICE_NAME.trim() } : {}),
  });
  // The exporter reads its endpoint, headers, timeout and compression from the OTEL_EXPORTER_OTLP_* variables.
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  if (!trace.setGlobalTracerProvider(provider)) {
    void provider.shutdown().catch(() => undefined);
    return undefined;
  }
  const contextManager = new AsyncLocalStorageContextManager();
  const ownsContext = context.setGlobalContextManager(contextManager);
  const ownsPropagation = propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  let stopping: Promise<void> | undefined;
  return {
    enabled: true,
    shutdown() {
      // Flushes the batch: a single-use worker must not exit with its spans still buffered.
      stopping ??= provider
        .shutdown()
        .catch((error: unknown) => diag.error('exporting spans failed', error))
        .finally(() => {
          trace.disable();
          if (ownsPropagation) propagation.disable();
          if (ownsContext) context.disable();
        });
      return stopping;
    },
  };
}
