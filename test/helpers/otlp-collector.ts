// A test OpenTelemetry collector: a real OTLP/HTTP receiver on loopback that takes JSON-encoded
// trace exports (gzip or not) at /v1/traces and keeps every span, flattened, in arrival order.
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { gunzipSync } from 'node:zlib'

export interface CollectedSpan {
  traceId: string
  spanId: string
  /** '' for a root span. */
  parentSpanId: string
  name: string
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number
  attributes: Record<string, unknown>
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message?: string }
  /** The resource's attributes (service.name, …). */
  resource: Record<string, unknown>
  /** The instrumentation scope the span was sent under. */
  scope: { name?: string; version?: string }
}

export interface OtlpCollector {
  /** 'http://127.0.0.1:<port>' — what OTEL_EXPORTER_OTLP_ENDPOINT is set to. */
  url: string
  spans: CollectedSpan[]
  /** Every POST received (path, headers), accepted or not. */
  requests: Array<{ path: string; headers: IncomingMessage['headers'] }>
  close(): Promise<void>
}

type OtlpValue = {
  stringValue?: string
  intValue?: string | number
  doubleValue?: number
  boolValue?: boolean
  arrayValue?: { values?: OtlpValue[] }
}

function value(v: OtlpValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue
  if (v.intValue !== undefined) return Number(v.intValue)
  if (v.doubleValue !== undefined) return v.doubleValue
  if (v.boolValue !== undefined) return v.boolValue
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(value)
  return undefined
}

function attributes(list: Array<{ key: string; value: OtlpValue }> | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const a of list ?? []) out[a.key] = value(a.value)
  return out
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const spans: CollectedSpan[] = []
  const requests: OtlpCollector['requests'] = []
  const server = createServer(async (req, res) => {
    requests.push({ path: req.url ?? '', headers: req.headers })
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    let body = Buffer.concat(chunks)
    if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).includes('json')) {
      res.writeHead(415).end()
      return
    }
    if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body)
    const doc = JSON.parse(body.toString('utf8')) as { resourceSpans?: any[] }
    for (const rs of doc.resourceSpans ?? []) {
      const resource = attributes(rs.resource?.attributes)
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          spans.push({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            name: s.name,
            kind: s.kind,
            attributes: attributes(s.attributes),
            status: s.status ?? { code: 0 },
            resource,
            scope: ss.scope ?? {},
          })
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
  })
  server.keepAliveTimeout = 1000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
