#!/usr/bin/env node
import { readFile, writeFile, mkdir } from 'node:fs/promises'
import { generateOpenApi } from '../app/openapi.js'
import { EXIT } from '../app/startup-error.js'

/** `npm run openapi` writes openapi/openapi.json; `--check` fails when the committed file is stale. */
const target = new URL('../../openapi/openapi.json', import.meta.url)
const doc = await generateOpenApi()
if (process.argv.includes('--check')) {
  const current = await readFile(target, 'utf8').catch(() => '')
  if (current !== doc) {
    process.stderr.write('openapi/openapi.json is stale: run `npm run openapi` and commit it.\n')
    process.exit(EXIT.FAILURE)
  }
} else {
  await mkdir(new URL('.', target), { recursive: true })
  await writeFile(target, doc)
  process.stdout.write(`wrote ${target.pathname}\n`)
}
