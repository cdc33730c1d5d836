import type { HnswParams } from './hnsw-params.js'
import type { IndexFileRecord, PreparedIndexFile } from './index-dir.js'

// The messages between the store (main thread) and the index worker. Tenants are named by their
// key (tenantKey: also the file name). Every index the worker holds carries the `epoch` the main
// thread gave it when it asked for it (open): messages of an older epoch — inserts sent to an
// index since replaced, progress of one — are ignored on either side.

/** Given to the worker when it starts. */
export interface IndexWorkerData {
  /** `<dataDir>/memory/hnsw` */
  dir: string
  dim: number
  params: HnswParams
  /** The search lane's shared memory (search-lane.ts); without it every search goes by message. */
  lane?: SharedArrayBuffer | undefined
}

/** Requests carry an `id`; the worker answers each with one {@link Reply}. */
export type IndexRequest =
  /** Loads the key's newest file (checked first), else creates an empty index; `fresh`: creates one whatever is on disk. */
  | {
      type: 'open'
      key: string
      epoch: number
      labelsBelow: number
      record?: IndexFileRecord | undefined
      tombstones: number[]
      fresh: boolean
    }
  /** Nearest labels with cosine similarity; `vector` as the embedder made it (float64). */
  | { type: 'search'; key: string; vector: Float64Array; k: number; ef?: number | undefined }
  /** Cosine of `vector` against the given labels' vectors in the index (those it holds). */
  | { type: 'score'; key: string; vector: Float64Array; labels: Float64Array }
  /** Writes the index to a checked temp file (see TenantIndex.write). */
  | { type: 'write'; key: string }
  /** Inserts what is queued, synchronously, for up to `ms` (at close). */
  | { type: 'flush'; ms: number }

/** Messages without an answer. */
export type IndexNotice =
  /** Labels to insert, in order, all below `upTo`; once they are in, the index covers every label below `upTo`. `vectors`: labels.length × dim floats. */
  | { type: 'add'; key: string; epoch: number; labels: Float64Array; vectors: Float32Array; upTo: number }
  /** Deleted labels: marked deleted in the index, or never inserted when they are still queued. */
  | { type: 'delete'; key: string; labels: number[] }
  /** A save of `changes` changes was recorded: they no longer count towards the next one. */
  | { type: 'saved'; key: string; epoch: number; changes: number }

/**
 * Ends the worker between two of its calls into hnswlib (after what it is doing): a worker
 * terminated from outside while hnswlib-node is inside a call aborts the whole process (its
 * error cannot be thrown into a terminating thread).
 */
export interface ExitNotice {
  type: 'exit'
  code: number
}

/** A lane request waits in the shared slot while the worker does not watch it (search-lane.ts). */
export interface WakeNotice {
  type: 'wake'
}

export type ToWorker = (IndexRequest & { id: number }) | IndexNotice | ExitNotice | WakeNotice

export interface OpenReply {
  covered: number
  /** Where the index came from: its saved file, nothing on disk, a damaged file (moved aside), or asked fresh. */
  from: 'file' | 'none' | 'damaged' | 'fresh'
  /** The damaged file, where it was moved, and why it was refused. */
  file?: string | undefined
  movedTo?: string | null
  reason?: string
}

export interface SearchReply {
  labels: Float64Array
  scores: Float64Array
  /** The index's `covered` when it searched (a label at or above it was not in the index). */
  covered: number
  epoch: number
}

export interface ScoreReply {
  labels: Float64Array
  scores: Float64Array
}

/** `changes`: the index's unsaved changes when it was written; `epoch`: the index's. */
export type WriteReply = PreparedIndexFile & { changes: number; epoch: number }

export type Reply =
  | { type: 'reply'; id: number; ok: true; value: unknown }
  /** `broken`: a native call on the index threw (the index is not trusted again). `damaged`: the reason a file was refused. */
  | { type: 'reply'; id: number; ok: false; message: string; broken?: boolean }

/**
 * Sent by the worker on its own: how far an index's inserts have got (after each slice of
 * inserts), and an insert that threw (the rest of that index's queue is dropped; `covered` is
 * where it stopped).
 */
export type WorkerEvent =
  | { type: 'progress'; key: string; epoch: number; covered: number; dirty: number }
  | { type: 'failed'; key: string; epoch: number; label: number; covered: number; message: string }

export type FromWorker = Reply | WorkerEvent
