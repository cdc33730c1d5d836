import { cosine, type Ranked } from './memory-ranking.js'

/**
 * Per tenant, the vectors of committed entries the index worker has not acknowledged yet, by
 * label (null: the embedder gave a vector of the wrong length). Searches scan them exactly, so an
 * entry is found the moment its add is acknowledged, and again if the worker has to start over.
 */
export class VectorTail {
  private readonly byTenant = new Map<string, Map<number, Float32Array | null>>()

  /** The label's vector; null when it has none usable; undefined when it is not here. */
  get(tenant: string, label: number): Float32Array | null | undefined {
    return this.byTenant.get(tenant)?.get(label)
  }

  set(tenant: string, label: number, vector: Float32Array | null): void {
    let tail = this.byTenant.get(tenant)
    if (!tail) this.byTenant.set(tenant, (tail = new Map()))
    tail.set(label, vector)
  }

  delete(tenant: string, label: number): void {
    this.byTenant.get(tenant)?.delete(label)
  }

  drop(tenant: string): void {
    this.byTenant.delete(tenant)
  }

  /** Removes labels in [from, to): the index holds them now. */
  prune(tenant: string, from: number, to: number): void {
    const tail = this.byTenant.get(tenant)
    if (!tail || tail.size === 0 || to <= from) return
    if (to - from <= tail.size) {
      for (let l = from; l < to; l++) tail.delete(l)
    } else {
      for (const l of tail.keys()) if (l >= from && l < to) tail.delete(l)
    }
  }

  /** Cosine of `vector` against every waiting vector of a label at or above `from`. */
  scan(tenant: string, vector: readonly number[], from: number): Ranked[] {
    const tail = this.byTenant.get(tenant)
    const out: Ranked[] = []
    if (!tail) return out
    for (const [label, v] of tail) if (v && label >= from) out.push({ label, score: cosine(vector, v) })
    return out
  }
}
