// The README's curl session, run as written against a live server: the real entry point in a
// child process (every capability on, a fresh data directory, no provider credentials, so
// sessions use the offline model), and each fenced `sh` block of the walkthrough run by bash
// with real curl and jq, in one shell, so variables carry from block to block as they do for
// a reader pasting them. Only the address changes: `localhost:8080` becomes the test server's.
//
// Each block is a step. Its `# → ` lines are what it must print, exactly; a step without them
// has a check below. A step nobody checks fails the test, so the README cannot grow an
// unchecked step.
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { spawnServer, stopServer } from './helpers/child-server.js'

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
const SECTION = '## A session with curl'
const BASE = 'localhost:8080'
const EXPECT = '# → '

interface Step {
  index: number
  script: string
  expected: string[]
}
interface Ran {
  step: Step
  rc: number
  out: string[]
  vars: Record<string, string>
}

/** The walkthrough's `sh` blocks, in order. */
function walkthroughSteps(readme: string): Step[] {
  const start = readme.indexOf(`\n${SECTION}\n`)
  if (start < 0) throw new Error(`README.md has no '${SECTION}' section`)
  const end = readme.indexOf('\n## ', start + 1)
  const section = readme.slice(start, end < 0 ? undefined : end)
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m, index) => {
    const lines = m[1]!.split('\n').filter((l) => l.length > 0)
    return {
      index,
      script: lines.filter((l) => !l.startsWith(EXPECT)).join('\n'),
      expected: lines.filter((l) => l.startsWith(EXPECT)).map((l) => l.slice(EXPECT.length)),
    }
  })
}

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** Checks of the steps whose output the README does not spell out (ids, streams). */
const CHECKS: Array<{ what: RegExp; check: (t: Test, r: Ran) => void }> = [
  {
    what: /^SESSION=\$\(curl -s localhost:8080\/v1\/sessions /,
    check: (t, r) => {
      t.match(r.vars.SESSION, UUID_V7, 'SESSION holds a UUIDv7')
      t.same(r.out, [r.vars.SESSION], 'echo prints it')
    },
  },
  {
    what: /-H 'accept: text\/event-stream'/,
    check: (t, r) => {
      const frames = sseFrames(r.out)
      const types = frames.map((f) => f.event)
      t.equal(types[0], 'turn_started')
      t.ok(types.includes('text_delta'), 'text deltas stream as the model writes')
      t.same(
        types.filter((x) => x !== 'text_delta'),
        ['turn_started', 'assistant_message', 'turn_completed'],
      )
      t.same(
        frames.filter((f) => f.id !== undefined).map((f) => f.id),
        ['5', '6', '7'],
        'stored events carry their seq as id',
      )
      t.ok(
        frames.filter((f) => f.event === 'text_delta').every((f) => f.id === undefined),
        'text deltas have no id',
      )
      const done = JSON.parse(frames.at(-1)!.data!)
      t.match(done, { seq: 7, session_id: r.vars.SESSION, turn: 2, type: 'turn_completed', data: { output_text: 'echo: Stream this.' } })
    },
  },
  {
    what: /\/events\?after=0/,
    check: (t, r) =>
      t.same(
        r.out,
        [
          'session_created',
          'turn_started',
          'assistant_message',
          'turn_completed',
          'turn_started',
          'assistant_message',
          'turn_completed',
        ].map((type) => `event: ${type}`),
        'every stored event since seq 0, in order',
      ),
  },
]

function sseFrames(lines: string[]): Array<{ id?: string; event?: string; data?: string }> {
  const frames: Array<{ id?: string; event?: string; data?: string }> = []
  let cur: { id?: string; event?: string; data?: string } = {}
  for (const line of [...lines, '']) {
    if (line === '') {
      if (Object.keys(cur).length) frames.push(cur)
      cur = {}
      continue
    }
    const m = /^(id|event|data): (.*)$/.exec(line)
    if (m) cur[m[1] as 'id' | 'event' | 'data'] = m[2]!
  }
  return frames
}

/** Runs every step in one bash, printing a marker after each with its exit code and the variables set so far. */
async function runSteps(steps: Step[], base: string, cwd: string): Promise<{ ran: Ran[]; stderr: string; code: number | null }> {
  const names = new Set<string>()
  let script = ''
  for (const s of steps) {
    for (const m of s.script.matchAll(/^([A-Z_][A-Z0-9_]*)=/gm)) names.add(m[1]!)
    script += `${s.script.replaceAll(BASE, base)}\n__rc=$?\nprintf '\\n\\036STEP ${s.index} %s\\n' "$__rc"\n`
    for (const n of names) script += `printf '\\037${n}=%s\\n' "$${n}"\n`
  }
  const child = spawn('bash', ['--noprofile', '--norc', '-c', script], {
    cwd,
    env: { PATH: process.env.PATH!, HOME: cwd, LC_ALL: 'C.UTF-8' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    stdout += d
  })
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d
  })
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve))
  clearTimeout(timer)
  const ran: Ran[] = []
  let chunk: string[] = []
  let vars: Record<string, string> = {}
  for (const line of stdout.split('\n')) {
    const marker = /^\x1eSTEP (\d+) (\d+)$/.exec(line)
    if (marker) {
      while (chunk.length && chunk[chunk.length - 1] === '') chunk.pop()
      vars = {}
      ran.push({ step: steps[Number(marker[1])]!, rc: Number(marker[2]), out: chunk, vars })
      chunk = []
    } else if (line.startsWith('\x1f')) {
      const at = line.indexOf('=')
      vars[line.slice(1, at)] = line.slice(at + 1)
    } else {
      chunk.push(line)
    }
  }
  return { ran, stderr, code }
}

t.test('the README walkthrough runs as written against a live server', async (t) => {
  const steps = walkthroughSteps(README)
  t.ok(steps.length >= 8, `found the walkthrough's steps (${steps.length})`)
  for (const s of steps) {
    t.ok(s.script.includes(BASE), `step ${s.index} talks to ${BASE}`)
    t.ok(s.expected.length > 0 || CHECKS.some((c) => c.what.test(s.script)), `step ${s.index} is checked:\n${s.script}`)
  }

  const dataDir = mkdtempSync(join(tmpdir(), 'burrow-readme-'))
  const cwd = mkdtempSync(join(tmpdir(), 'burrow-readme-shell-'))
  t.teardown(() => {
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(cwd, { recursive: true, force: true })
  })
  // Only PATH, HOME and TMPDIR from the test's environment: no provider keys, the quick start's defaults.
  const server = await spawnServer(
    {
      HOST: '127.0.0.1',
      PORT: '0',
      BURROW_DATA_DIR: dataDir,
      BURROW_SESSION_STORE: 'lmdb',
      BURROW_MEMORY_STORE: 'hnsw',
      BURROW_COMPACTION: 'on',
    },
    { inherit: false },
  )
  t.teardown(() => stopServer(server))
  const caps = server.lines.find((l) => l.capabilities)
  t.same(
    caps?.capabilities,
    { session_store: true, memory_store: true, session_compaction: true },
    'every capability on, as in the quick start',
  )

  const { ran, stderr, code } = await runSteps(steps, new URL(server.url).host, cwd)
  t.equal(code, 0, 'the shell ran to the end')
  t.equal(stderr, '', 'nothing on stderr')
  t.equal(ran.length, steps.length, 'every step ran')
  for (const r of ran) {
    t.test(`step ${r.step.index}: ${r.step.script.split('\n')[0]!.slice(0, 70)}`, async (t) => {
      t.equal(r.rc, 0, 'exit code 0')
      const custom = CHECKS.find((c) => c.what.test(r.step.script))
      if (custom) custom.check(t, r)
      else t.same(r.out, r.step.expected, 'prints what the README says')
    })
  }
})
