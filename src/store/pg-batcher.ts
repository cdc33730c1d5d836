/** One request waiting for its batch. */
interface Waiting<In, Out> {
  input: In
  resolve: (out: Out) => void
  reject: (err: unknown) => void
}

/**
 * Group execution of one kind of small statement (a lease taken, a lease released): requests made
 * while a batch is in flight go together in the next, as one statement over arrays, so a busy
 * replica pays one round trip and one transaction for many sessions instead of one each. Up to
 * `maxFlights` batches are in flight, and no two requests with the same key are at once (the
 * second waits for the first's batch to end); a batch's requests are handed to `run` sorted by
 * key, so two batches lock rows in one order as far as the plan follows it. `run` answers one
 * output per input, in order; its failure is every request's.
 */
export class StatementBatcher<In, Out> {
  private waiting: Array<Waiting<In, Out>> = []
  private flights = 0
  /** Keys of the requests in flight: a request waits while one with its key is in flight. */
  private readonly flying = new Set<string>()

  constructor(
    private readonly run: (inputs: In[]) => Promise<Out[]>,
    private readonly key: (input: In) => string,
    private readonly maxFlights = 2,
    private readonly maxBatch = 256,
  ) {}

  submit(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.waiting.push({ input, resolve, reject })
      this.pump()
    })
  }

  private pump(): void {
    while (this.flights < this.maxFlights && this.waiting.length > 0) {
      const batch = new Map<string, Waiting<In, Out>>()
      const later: Array<Waiting<In, Out>> = []
      for (const w of this.waiting) {
        const k = this.key(w.input)
        if (batch.size >= this.maxBatch || batch.has(k) || this.flying.has(k)) later.push(w)
        else batch.set(k, w)
      }
      if (batch.size === 0) return
      this.waiting = later
      const keys = [...batch.keys()].sort()
      for (const k of keys) this.flying.add(k)
      this.flights++
      void this.fly(keys.map((k) => batch.get(k)!)).finally(() => {
        for (const k of keys) this.flying.delete(k)
        this.flights--
        this.pump()
      })
    }
  }

  private async fly(batch: Array<Waiting<In, Out>>): Promise<void> {
    let outs: Out[]
    try {
      outs = await this.run(batch.map((w) => w.input))
      if (outs.length !== batch.length) throw new Error(`a batch of ${batch.length} answered ${outs.length} results`)
    } catch (err) {
      for (const w of batch) w.reject(err)
      return
    }
    for (let i = 0; i < batch.length; i++) batch[i]!.resolve(outs[i]!)
  }
}
