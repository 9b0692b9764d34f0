// An OpenTelemetry SDK for Tollgate's spans, preloaded into the process before Tollgate starts:
//
//   node --import ./examples/tracing/otel.mjs dist/cli/main.js serve --config examples/rules
//   node --import ./examples/tracing/otel.mjs examples/tracing/app.mjs
//
// Tollgate depends on @opentelemetry/api only; the SDK is the application's (here:
// npm install @opentelemetry/sdk-trace @opentelemetry/context-async-hooks). Spans go to stderr as
// JSON lines, so the example needs no collector; in production replace `jsonLines` with an OTLP
// exporter (@opentelemetry/exporter-trace-otlp-http: `new OTLPTraceExporter()`, which reads
// OTEL_EXPORTER_OTLP_ENDPOINT) and keep the BatchSpanProcessor.
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

/** Each span as one JSON line on stderr. */
const jsonLines = {
  export(spans, done) {
    for (const span of spans) {
      const line = {
        name: span.name,
        traceId: span.spanContext().traceId,
        spanId: span.spanContext().spanId,
        parentSpanId: span.parentSpanContext?.spanId,
        status: span.status.code === 2 ? 'ERROR' : 'OK',
        durationUs: Math.round(span.duration[0] * 1e6 + span.duration[1] / 1e3),
        attributes: span.attributes,
      };
      process.stderr.write(`${JSON.stringify(line)}\n`);
    }
    done({ code: 0 });
  },
  shutdown: async () => undefined,
};

const provider = new TracerProvider({ spanProcessors: [new BatchSpanProcessor({ exporter: jsonLines, scheduledDelayMillis: 500 })] });
trace.setGlobalTracerProvider(provider);
// Parent and child spans across awaits (a check and its store calls) need an async context manager.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
// A process that ends on its own sends its last spans first.
process.once('beforeExit', () => void provider.shutdown());
