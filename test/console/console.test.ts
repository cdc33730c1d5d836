// The console end to end in a real headless Chromium, against the real server: first load,
// a session created and a streamed answer, a compaction's discarded messages, memory search
// followed to its event, the live activity feed, and a read-only token refused a write.
import t, { type Test } from 'tap'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { Api, startBurrow, type Harness } from '../helpers/harness.js'
import { tempDatabase } from '../helpers/pg.js'
import { launchChromium } from './browser.js'

const ENV = { BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'hnsw', BURROW_COMPACTION: 'on', BURROW_DURABILITY: 'relaxed' }
const MODEL = 'openai:gpt-4o-mini'

let browser: Browser
t.before(async () => {
  browser = await launchChromium()
})
t.teardown(() => browser?.close())

async function open(t: Test, h: Harness, path = '/console', width = 1280, opts: { fakeClock?: boolean } = {}): Promise<Page> {
  const context = await browser.newContext({ viewport: { width, height: 900 } })
  t.teardown(() => context.close())
  const page = await context.newPage()
  const errors: string[] = []
  page.on('pageerror', (err) => errors.push(String(err)))
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) errors.push(m.text())
  })
  // Checked before the test ends (a teardown runs after it).
  pageErrors.set(page, errors)
  if (opts.fakeClock) await page.clock.install() // the page's timers and Date, moved on by the test
  await page.goto(h.url + path)
  return page
}

const pageErrors = new WeakMap<Page, string[]>()
const noErrors = (t: Test, page: Page) => t.same(pageErrors.get(page), [], 'no script errors in the page')

t.test('single-tenant console', async (t) => {
  const h = await startBurrow(ENV, { fake: true })
  t.teardown(() => h.close())
  h.fake.autoSummaries = true

  t.test('the first load is small, same-origin and interactive', async (t) => {
    const page = await open(t, h)
    const requests: string[] = []
    page.on('request', (r) => requests.push(r.url()))
    await page.reload()
    await page.getByRole('link', { name: 'Sessions' }).waitFor()
    // Run in the page (a string: the browser's globals are not this process's types).
    const bytes = await page.evaluate<number>(
      "[...performance.getEntriesByType('navigation'), ...performance.getEntriesByType('resource')].reduce((sum, e) => sum + e.transferSize, 0)",
    )
    t.ok(bytes > 1000 && bytes <= 300 * 1024, `first load ${bytes} bytes transferred (≤ 300 KB)`)
    t.ok(
      requests.every((u) => u.startsWith(h.url)),
      'nothing from another origin',
    )
    const res = await fetch(`${h.url}/console`, { headers: { 'accept-encoding': 'gzip' } })
    t.match(res.headers.get('content-security-policy'), /default-src 'none'/)
    t.equal(res.headers.get('referrer-policy'), 'no-referrer')
    const missing = await fetch(`${h.url}/console/js/nope.js`)
    t.equal(missing.status, 404)
    t.match(await missing.json(), { code: 'ROUTE_NOT_FOUND' }, 'a file the console does not have: a code of the table')
    noErrors(t, page)
  })

  t.test('create a session, send a message, see the answer stream in', async (t) => {
    const page = await open(t, h, '/console#/sessions')
    await page.getByLabel('Model').fill(MODEL)
    await page.getByRole('button', { name: 'New session' }).click()
    await page.waitForURL(/#\/sessions\/[0-9a-f-]{36}$/)
    const answer = 'Burrow keeps every event of the session in its log, streamed as it happens.'
    h.fake.enqueue({ text: answer, chunkSize: 6, delayMs: 40 })
    await page.getByLabel('Message').fill('What does Burrow keep?')
    await page.getByRole('button', { name: 'Send' }).click()
    const streaming = page.getByTestId('streaming')
    await streaming.waitFor()
    const partial = await streaming.textContent()
    t.ok(partial && partial.length > 0 && partial.length < answer.length && answer.startsWith(partial), `streamed, partial: "${partial}"`)
    await page.locator('[data-type="turn_completed"]').waitFor()
    t.match(await page.locator('[data-type="assistant_message"]').textContent(), answer)
    t.equal(await streaming.count(), 0, 'the streamed text gave way to the stored message')
    t.match(await page.locator('[data-type="turn_started"]').textContent(), 'What does Burrow keep?')
    noErrors(t, page)
  })

  t.test("a compaction's discarded messages, and memory search followed to the event", async (t) => {
    const id = await h.api.createSession({ model: MODEL, memory: true, compaction: { recent_turn_budget: 1 } })
    const said = [
      'The zebra protocol uses port 7741.',
      'Noted, 7741 it is.',
      'Second question about llamas.',
      'Llamas are fine.',
      'Third.',
      'Third answer.',
    ]
    for (let i = 0; i < 3; i++) {
      h.fake.enqueue({ text: said[2 * i + 1]! })
      t.equal((await h.api.turn(id, { input: said[2 * i]! })).status, 200)
    }
    const page = await open(t, h, `/console#/sessions/${id}`)
    await page.getByRole('button', { name: 'Compact now' }).click()
    const card = page.getByTestId('compaction')
    await card.waitFor()
    t.match(await card.textContent(), /6 → 3 messages/)
    await card.getByText('Discarded messages').click()
    const discarded = card.getByTestId('discarded')
    await discarded.waitFor()
    const text = await discarded.textContent()
    for (const s of said.slice(0, 4)) t.match(text, s, `discarded verbatim: ${s}`)
    t.equal(await page.getByTestId('next-history').locator('li').count(), 3, 'the next model input is the compacted history')

    // What compaction discarded is indexed into memory in the background: search until it is there.
    await page.getByRole('link', { name: 'Memory' }).click()
    await page.getByLabel('Search memory').fill('zebra protocol port')
    let hit = page.getByTestId('hit').filter({ hasText: 'zebra protocol' }).first()
    for (let i = 0; i < 50 && (await hit.count()) === 0; i++) {
      await page.getByRole('button', { name: 'Search' }).click()
      await page.waitForTimeout(100)
      hit = page.getByTestId('hit').filter({ hasText: 'zebra protocol' }).first()
    }
    t.equal(await hit.count(), 1, 'the discarded message is found in memory')
    const link = hit.getByTestId('provenance')
    const href = await link.getAttribute('href')
    const seq = Number(/seq=(\d+)/.exec(href ?? '')?.[1])
    await link.click()
    await page.waitForURL(new RegExp(`#/sessions/${id}\\?seq=${seq}$`))
    const target = page.locator(`#seq-${seq}`)
    await target.waitFor()
    t.match(await target.getAttribute('class'), /highlight/, 'the event the hit came from is marked')
    t.match(await target.textContent(), 'zebra protocol', 'and it is the verbatim source')
    await page.waitForTimeout(100)
    t.ok(await target.isVisible(), 'and scrolled into view')
    noErrors(t, page)
  })

  t.test('the activity view shows every session live', async (t) => {
    const page = await open(t, h, '/console#/activity')
    await page.getByTestId('stream-state').filter({ hasText: 'live' }).waitFor()
    const id = await h.api.createSession({ model: 'offline:echo' })
    await h.api.turn(id, { input: 'visible in the activity feed' })
    const row = page.locator(`li[data-type="turn_completed"][data-session="${id}"]`)
    await row.waitFor()
    t.equal(await row.count(), 1)
    await row.getByRole('link').click()
    await page.waitForURL(new RegExp(`#/sessions/${id}`))
    await page.locator('[data-type="turn_started"]').filter({ hasText: 'visible in the activity feed' }).waitFor()
    noErrors(t, page)
  })

  t.test('the sessions list filters by metadata', async (t) => {
    const tagged = await h.api.createSession({ model: 'offline:echo', metadata: { console: 'find-me' } })
    await h.api.createSession({ model: 'offline:echo', metadata: { console: 'not-me' } })
    const page = await open(t, h, '/console#/sessions')
    await page.getByLabel('Metadata').fill('console=find-me')
    await page.getByLabel('Metadata').press('Enter')
    await page.locator(`tr[data-session="${tagged}"]`).waitFor()
    await page.waitForFunction("document.querySelectorAll('tbody tr[data-session]').length === 1")
    t.equal(await page.locator('tbody tr[data-session]').count(), 1, 'only the matching session')
    noErrors(t, page)
  })

  t.test("the composer answers a paused turn's client tool call, and interrupts a running turn", async (t) => {
    const tools = [
      { name: 'get_weather', description: 'Weather in a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
    ]
    const id = await h.api.createSession({ model: 'offline:echo', tools })
    const page = await open(t, h, `/console#/sessions/${id}`)
    await page.getByLabel('Message').fill('/tool get_weather {"city":"Oslo"}')
    await page.getByRole('button', { name: 'Send' }).click()
    const box = page.getByLabel('Result for get_weather')
    await box.waitFor()
    await box.fill('5°C, clear')
    await page.getByRole('button', { name: 'Send results' }).click()
    await page.locator('[data-type="turn_completed"]').waitFor()
    t.match(await page.locator('[data-type="tool_result"]').textContent(), '5°C, clear', 'the result went into the history')
    t.match(await page.locator('[data-type="turn_completed"]').textContent(), 'completed')
    await page.getByLabel('Message').waitFor()

    // A slow answer, interrupted from the console: the turn ends INTERRUPTED and the session takes the next.
    const slow = await h.api.createSession({ model: MODEL })
    h.fake.enqueue({ text: 'a very slow answer that will not be finished', chunkSize: 2, delayMs: 200 })
    await page.goto(`${h.url}/console#/sessions/${slow}`)
    await page.getByLabel('Message').fill('take your time')
    await page.getByRole('button', { name: 'Send' }).click()
    await page.getByTestId('streaming').waitFor()
    await page.getByRole('button', { name: 'Interrupt' }).click()
    const failed = page.locator('[data-type="turn_failed"]')
    await failed.waitFor()
    t.match(await failed.textContent(), 'INTERRUPTED')
    noErrors(t, page)
  })

  t.test('readable at 390 px wide', async (t) => {
    const page = await open(t, h, '/console#/sessions', 390)
    await page.getByRole('button', { name: 'New session' }).waitFor()
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth')
    t.ok(overflow <= 0, `no horizontal scrolling (${overflow} px)`)
    noErrors(t, page)
  })
})

t.test('with keys: the key is exchanged for a token, and a read-only token is refused a write', async (t) => {
  const h = await startBurrow({ ...ENV, BURROW_API_KEYS: 'console-key:tenantC' })
  t.teardown(() => h.close())
  const page = await open(t, h)
  await page.getByLabel('API key').fill('console-key')
  await page.getByLabel('Read-only').check()
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByText('read-only token').waitFor()
  const stored = await page.evaluate<string>('JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage })')
  t.notMatch(stored, 'console-key', 'the key is not kept')
  t.match(stored, 'bt1.', 'the token is')
  await page.getByRole('link', { name: 'Sessions' }).click()
  await page.getByRole('button', { name: 'New session' }).click()
  const alert = page.getByRole('alert')
  await alert.waitFor()
  t.match(await alert.textContent(), /FORBIDDEN/)
  t.same((await new Api(h.url, 'console-key').get('/v1/sessions')).body.items, [], 'nothing was created')
  noErrors(t, page)
})

t.test('the console refreshes its token before it expires, and keeps only the token', async (t) => {
  const h = await startBurrow({ ...ENV, BURROW_API_KEYS: 'console-key:tenantD' })
  t.teardown(() => h.close())
  const page = await open(t, h, '/console', 1280, { fakeClock: true })
  await page.getByLabel('API key').fill('console-key')
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('link', { name: 'Sessions' }).click()
  await page.getByRole('button', { name: 'New session' }).waitFor()
  const saved = async () => JSON.parse(await page.evaluate<string>("sessionStorage.getItem('burrow.console.token') ?? 'null'"))
  const first = await saved()
  t.match(first?.token, /^bt1\./, 'a token is kept')
  await new Promise((r) => setTimeout(r, 1100)) // the server's clock moves on too: the new token's expiry differs
  await page.clock.fastForward('13:00') // four fifths of its 15 minutes have passed
  await page.waitForFunction(
    `JSON.parse(sessionStorage.getItem('burrow.console.token') ?? 'null')?.token !== ${JSON.stringify(first.token)}`,
  )
  const second = await saved()
  t.ok(second.expiresAt > first.expiresAt, 'refreshed: a later expiry')
  t.equal((await new Api(h.url, second.token).get('/v1/sessions')).status, 200, 'the new token works')
  await page.getByRole('button', { name: 'New session' }).click()
  await page.waitForURL(/#\/sessions\/[0-9a-f-]{36}$/)
  t.notMatch(await page.evaluate<string>('JSON.stringify({ ...sessionStorage, ...localStorage })'), 'console-key', 'never the key')
  noErrors(t, page)
})

for (const store of ['lmdb', 'postgres'])
  t.test(`the activity view resumes across a server restart with no gap and no duplicate (${store})`, async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'burrow-console-restart-'))
    t.teardown(() => rm(dataDir, { recursive: true, force: true }))
    const env =
      store === 'lmdb'
        ? ENV
        : {
            ...ENV,
            BURROW_SESSION_STORE: 'postgres',
            BURROW_MEMORY_STORE: 'off',
            BURROW_DATABASE_URL: (await tempDatabase(t, 'console_restart')).url,
          }
    let h = await startBurrow(env, { dataDir })
    t.teardown(() => h.close())
    const page = await open(t, h, '/console#/activity')
    const state = page.getByTestId('stream-state')
    await state.filter({ hasText: 'live' }).waitFor()
    const before = await h.api.createSession({ model: 'offline:echo' })
    await h.api.turn(before, { input: 'before the restart' })
    await page.locator(`li[data-type="turn_completed"][data-session="${before}"]`).waitFor()

    const port = new URL(h.url).port
    await h.close()
    await state.filter({ hasText: 'reconnecting' }).waitFor()
    h = await startBurrow({ ...env, PORT: port }, { dataDir })
    // Committed while the page is still disconnected: it comes back by Last-Event-ID.
    const during = await h.api.createSession({ model: 'offline:echo' })
    await h.api.turn(during, { input: 'while the page was away' })
    await h.api.turn(before, { input: 'and on the old session' })
    await page.locator(`li[data-type="turn_completed"][data-session="${during}"]`).waitFor({ timeout: 10_000 })
    await state.filter({ hasText: 'live' }).waitFor()
    const after = await h.api.createSession({ model: 'offline:echo' })
    await h.api.turn(after, { input: 'live after the restart' })
    await page.locator(`li[data-type="turn_completed"][data-session="${after}"]`).waitFor()

    // Every stored event of the three sessions since the page opened, each once.
    const rows = await page
      .locator('li[data-type]')
      .evaluateAll((els) => els.map((el) => `${el.getAttribute('data-session')} ${el.getAttribute('data-type')}`))
    for (const [id, turns] of [
      [before, 2],
      [during, 1],
      [after, 1],
    ] as const) {
      t.equal(rows.filter((r) => r === `${id} turn_completed`).length, turns, `${id}: each turn once`)
      t.equal(rows.filter((r) => r === `${id} turn_started`).length, turns)
    }
    t.equal(rows.filter((r) => r === `${during} session_created`).length, 1, 'created while away, seen once')
    noErrors(t, page)
  })

t.test('on PostgreSQL: the console runs a turn and streams it, and the activity view is live', async (t) => {
  const db = await tempDatabase(t, 'console')
  const h = await startBurrow(
    { BURROW_SESSION_STORE: 'postgres', BURROW_MEMORY_STORE: 'postgres', BURROW_DATABASE_URL: db.url, BURROW_COMPACTION: 'on' },
    { fake: true },
  )
  t.teardown(() => h.close())
  const activity = await open(t, h, '/console#/activity')
  await activity.getByTestId('stream-state').filter({ hasText: 'live' }).waitFor()
  const page = await open(t, h, '/console#/sessions')
  await page.getByLabel('Model').fill(MODEL)
  await page.getByRole('button', { name: 'New session' }).click()
  await page.waitForURL(/#\/sessions\/[0-9a-f-]{36}$/)
  const id = /#\/sessions\/([0-9a-f-]{36})$/.exec(page.url())![1]!
  h.fake.enqueue({ text: 'Stored in PostgreSQL, streamed to the browser.', chunkSize: 5, delayMs: 30 })
  await page.getByLabel('Message').fill('Where is this kept?')
  await page.getByRole('button', { name: 'Send' }).click()
  await page.getByTestId('streaming').waitFor()
  await page.locator('[data-type="turn_completed"]').waitFor()
  t.match(await page.locator('[data-type="assistant_message"]').textContent(), 'Stored in PostgreSQL, streamed to the browser.')
  await activity.locator(`li[data-type="turn_completed"][data-session="${id}"]`).waitFor()
  noErrors(t, page)
  noErrors(t, activity)
})
