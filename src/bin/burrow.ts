#!/usr/bin/env node
import { cliHost, runCli } from '../app/cli-host.js'
import { EXIT } from '../app/startup-error.js'

/** `burrow <command>` (package bin; `npx burrow --help`). */
runCli(process.argv.slice(2), cliHost({ stdin: process.stdin, stdout: process.stdout, stderr: process.stderr })).then(
  (code) => {
    process.exitCode = code
  },
  (err) => {
    process.stderr.write(`burrow: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
    process.exitCode = EXIT.FAILURE
  },
)
