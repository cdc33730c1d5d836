import { createInterface } from 'node:readline'
import type { Readable, Writable } from 'node:stream'
import type { SessionOperations } from '../../core/session-service.js'
import { dispatchText } from './rpc-dispatcher.js'

/**
 * JSON-RPC 2.0 over stdio: one message (request or batch) per line in, one response per
 * line out; while a turn runs, its events are written as `event` notifications. Requests
 * are handled concurrently (responses carry their ids). Resolves when input ends and every
 * request has been answered.
 */
export async function runRpcStdio(
  ops: SessionOperations,
  opts: { apiKey?: string | undefined },
  io: { input: Readable; output: Writable },
): Promise<void> {
  let n = 0
  const write = (msg: unknown) => {
    io.output.write(`${JSON.stringify(msg)}\n`)
  }
  const pending = new Set<Promise<void>>()
  const lines = createInterface({ input: io.input, crlfDelay: Infinity })
  for await (const line of lines) {
    if (!line.trim()) continue
    const p = dispatchText(ops, line, {
      ctx: { apiKey: opts.apiKey, requestId: `stdio-${process.pid}-${++n}` },
      notify: (method, params) => write({ jsonrpc: '2.0', method, params }),
    }).then((out) => {
      if (out !== undefined) write(out)
    })
    pending.add(p)
    void p.finally(() => pending.delete(p))
  }
  await Promise.all(pending)
}
