/** `efHybrid`: the search breadth of a hybrid query's vector side (default `efSearch`), whose misses the keyword side makes up for. */
export interface HnswParams {
  m: number
  efConstruction: number
  efSearch: number
  efHybrid?: number
}

/**
 * m 16 and efConstruction 100: at 20,000 entries (hashed embedder) recall@10 against the exact
 * top 10 is 99.1 % (200: 99.3 %, 64: 98.3 %) and an insert costs 0.21 ms (200: 0.37 ms) — see
 * the memory-hnsw benchmark's sweep. A file keeps the parameters it was built with. Hybrid
 * queries search at ef 64 (a third less work than 96): memory-recall's hybrid recall is the same.
 */
export const DEFAULT_HNSW: HnswParams = { m: 16, efConstruction: 100, efSearch: 96, efHybrid: 64 }
