/** One request waiting for its batch. */
interface Waiting<In, Out> {
  input: In
  resolve: (out: Out) => void
  reject: (err: unknown) => void
}

/**
 * Group execution of one kind of small statement (a lease taken, a lease released): requests made
 * while a batch is in flight go together in the next, as one statement over arrays, so a busy
 * replica pays one round trip and one transaction for many sessions instead of one each. A batch
 * never holds two requests with the same key (the second waits for the next batch), and its
 * requests are handed to `run` sorted by key, so two replicas' batches lock rows in one order
 * as far as the plan follows it. `run` answers one output per input, in order; its failure is
 * every request's.
 */
export class StatementBatcher<In, Out> {
  private waiting: Array<Waiting<In, Out>> = []
  private flights = 0

  constructor(
    private readonly run: (inputs: In[]) => Promise<Out[]>,
    private readonly key: (input: In) => string,
    private readonly maxFlights = 1,
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
        if (batch.size >= this.maxBatch || batch.has(k)) later.push(w)
        else batch.set(k, w)
      }
      this.waiting = later
      const sorted = [...batch.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([, w]) => w)
      this.flights++
      void this.fly(sorted).finally(() => {
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
