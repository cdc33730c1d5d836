// The index worker's entry (started by IndexWorkerClient): the store's HNSW indexes live in
// this thread, so inserts, loads and saves never hold the main thread's event loop.
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads'
import { IndexHost } from './index-host.js'
import type { IndexWorkerData, ToWorker } from './index-worker-protocol.js'

const port = parentPort
if (!port) throw new Error('index-worker.ts runs as a worker thread (see IndexWorkerClient)')
const host = new IndexHost(
  workerData as IndexWorkerData,
  (m, transfer) => port.postMessage(m, transfer ?? []),
  () => receiveMessageOnPort(port)?.message as ToWorker | undefined,
  (code) => process.exit(code),
)
port.on('message', (m: ToWorker) => host.handle(m))
