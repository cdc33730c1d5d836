// Comparing two answers of one idempotent outcome: they differ only in what each request has of its own.

/** A response body without its request id, and without the `replayed` mark a replayed failure's data carries. */
export function sameAnswer(body: any): any {
  if (!body || typeof body !== 'object') return body
  const { request_id: _r, ...rest } = body
  if (rest.data && typeof rest.data === 'object') {
    const { replayed: _p, ...data } = rest.data
    rest.data = data
  }
  return rest
}
