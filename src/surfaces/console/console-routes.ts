import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { BurrowError } from '../../core/errors.js'
import { loadConsole, type ConsoleAsset } from './console-assets.js'

/**
 * `GET /console`: the browser console, a static page built on the public REST + SSE API only
 * (console/). Same origin, nothing from elsewhere: a Content-Security-Policy allows this
 * origin's scripts, styles and connections and the page's own import map, nothing else; no
 * referrer leaves the page (SSE URLs carry a token). The files are read and gzipped at start-up.
 */
export function consoleRoutes(app: FastifyInstance): void {
  const opts = { schema: { hide: true }, config: { rateLimit: false } } as const
  let bundle: ReturnType<typeof loadConsole>
  try {
    bundle = loadConsole()
  } catch (err) {
    // An installation without the console's files (console/ not copied) still serves the API.
    app.log.warn({ err }, "the console's files are missing from this installation: GET /console answers ROUTE_NOT_FOUND")
    app.get('/console', opts, async () => {
      throw new BurrowError('ROUTE_NOT_FOUND', "The console's files are missing from this installation (console/).")
    })
    return
  }
  const csp = [
    "default-src 'none'",
    `script-src 'self' '${bundle.importMapHash}'`,
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ')

  app.get('/console', opts, async (req, reply) => {
    reply.header('content-security-policy', csp).header('cache-control', 'no-cache')
    return send(req, reply, bundle.index)
  })
  app.get('/console/', opts, async (_req, reply) => reply.redirect('/console', 308))
  app.get<{ Params: { '*': string } }>('/console/*', opts, async (req, reply) => {
    const file = bundle.assets.get(req.params['*'])
    if (!file) throw new BurrowError('ROUTE_NOT_FOUND', `No console file ${req.params['*']}.`)
    // Vendored libraries change only with the package (a new start); the console's own files with a new version too.
    reply.header('cache-control', 'no-cache')
    return send(req, reply, file)
  })
}

function send(req: FastifyRequest, reply: FastifyReply, file: ConsoleAsset): FastifyReply {
  reply
    .header('etag', file.etag)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('vary', 'accept-encoding')
  reply.type(file.type)
  if (req.headers['if-none-match'] === file.etag) return reply.code(304).send()
  if (/\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) return reply.header('content-encoding', 'gzip').send(file.gzip)
  return reply.send(file.body)
}
