import { open } from 'lmdb'
const dir = process.argv[2]
const mode = process.argv[3]
const root = open({ path: dir + '/db', noMemInit: true })
const db = root.openDB({ name: 'x', encoding: 'json' })
process.on('unhandledRejection', (e, p) => { console.log('UNHANDLED', e.message, e.stack.split('\n').slice(0,6).join(' | ')); })
const obs = (e) => { if (e && e.commitError) e.commitError.catch((x) => console.log('commitError observed:', x.code, x.message)); return e }
let i = 0
for (; i < 200; i++) await db.put(i, 'x'.repeat(1000))
console.log('filled some')
try {
  if (mode === 'put') { for (; i < 20000; i++) await db.put(i, 'x'.repeat(1000)) }
  else { for (; i < 20000; i += 10) await db.childTransaction(() => { for (let j = 0; j < 10; j++) db.put(i + j, 'y'.repeat(1000)) }) }
} catch (e) { obs(e); console.log('failed at', i, e.message) }
await new Promise((r) => setTimeout(r, 200))
console.log('end')
process.exit(0)
