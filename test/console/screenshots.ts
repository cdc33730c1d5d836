// Takes the console's screenshots for docs/ (console.md, README): a real server with the fake
// LLM, a few sessions, and headless Chromium.   npx tsx test/console/screenshots.ts
import { join } from 'node:path'
import { startBurrow } from '../helpers/harness.js'
import { launchChromium } from './browser.js'

const DOCS = join(import.meta.dirname, '..', '..', 'docs')
const MODEL = 'openai:gpt-4o-mini'

const h = await startBurrow({ BURROW_SESSION_STORE: 'lmdb', BURROW_MEMORY_STORE: 'hnsw', BURROW_COMPACTION: 'on' }, { fake: true })
const browser = await launchChromium()
try {
  h.fake.autoSummaries = true
  const id = await h.api.createSession({
    model: MODEL,
    memory: true,
    compaction: { recent_turn_budget: 1 },
    metadata: { project: 'billing' },
  })
  const talk: Array<[string, string]> = [
    ['Which port does the zebra protocol use?', 'The zebra protocol listens on port 7741; the firewall rule FW-88 opens it.'],
    ['Who owns the invoice exporter?', 'Nina Raman owns the invoice exporter since the March reorg.'],
    ['Summarise what we decided today.', 'Port 7741 stays, Nina reviews the exporter change, release on Friday.'],
  ]
  for (const [q, a] of talk) {
    h.fake.enqueue({ text: a, usage: { input_tokens: 40 + q.length, output_tokens: Math.ceil(a.length / 4) } })
    await h.api.turn(id, { input: q })
  }
  await h.api.call('PUT', `/v1/sessions/${id}/notes/release`, { body: { value: 'Friday, after the exporter review' } })
  await h.api.post(`/v1/sessions/${id}/compact`)
  const other = await h.api.createSession({ model: 'offline:echo' })

  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } })
  const page = await context.newPage()
  await page.goto(`${h.url}/console#/activity`)
  await page.getByTestId('stream-state').filter({ hasText: 'live' }).waitFor()
  await h.api.turn(other, { input: 'Ping from the deploy bot' })
  h.fake.enqueue({ text: 'Yes: the exporter change is merged.' })
  await h.api.turn(id, { input: 'Is the exporter change merged?' })
  await page.locator('li[data-type="turn_completed"]').nth(1).waitFor()
  await page.screenshot({ path: join(DOCS, 'console-activity.png') })

  await page.goto(`${h.url}/console#/sessions/${id}`)
  await page.getByTestId('compaction').waitFor()
  await page.screenshot({ path: join(DOCS, 'console-session.png') })
  await page.getByTestId('compaction').getByText('Discarded messages').click()
  await page.getByTestId('discarded').waitFor()
  await page.getByTestId('compaction').scrollIntoViewIfNeeded()
  await page.screenshot({ path: join(DOCS, 'console-compaction.png') })

  await page.goto(`${h.url}/console#/memory`)
  await page.getByLabel('Search memory').fill('zebra protocol port')
  for (let i = 0; i < 50 && (await page.getByTestId('hit').count()) === 0; i++) {
    await page.getByRole('button', { name: 'Search' }).click()
    await page.waitForTimeout(100)
  }
  await page.screenshot({ path: join(DOCS, 'console-memory.png') })

  const phone = await browser.newContext({ viewport: { width: 390, height: 844 } })
  const small = await phone.newPage()
  await small.goto(`${h.url}/console#/sessions/${id}`)
  await small.getByTestId('compaction').waitFor()
  await small.screenshot({ path: join(DOCS, 'console-390px.png') })
  console.log('screenshots written to docs/')
} finally {
  await browser.close()
  await h.close()
}
