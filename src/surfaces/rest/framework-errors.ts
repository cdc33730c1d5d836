import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { fromFastifyError, problemOf } from '../http/problem.js'

/**
 * fastify's `frameworkErrors` option: what the router refuses before a route is found (a path
 * that is not valid percent-encoding, a parameter over `maxParamLength`) is answered as every
 * other error is, a problem document with a code of the table, instead of fastify's own JSON.
 */
export function frameworkErrors(err: FastifyError, req: FastifyRequest, reply: FastifyReply): void {
  const e = fromFastifyError(err)
  req.log.info({ code: e.code, detail: e.message }, 'request refused')
  // No route, so no onRequest hook has run: the request id header is set here.
  void reply.code(e.status).header('x-request-id', req.id).type('application/problem+json').send(problemOf(e, req.id))
}
