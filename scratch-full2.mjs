import { open } from 'lmdb'
import { execSync } from 'node:child_process'
const dir = process.argv[2]
const root = open({ path: dir + '/db', noMemInit: true })
const db = root.openDB({ name: 'x', encoding: 'json' })
process.on('unhandledRejection', (e) => { console.log('UNHANDLED', e.message); })
const obs = (e) => { if (e && e.commitError) e.commitError.catch((x) => console.log('commitError observed:', x.code, x.message)); return e }
let i = 0
try {
  for (; i < 20000; i++) await db.put(i, 'x'.repeat(1000))
} catch (e) { obs(e); console.log('failed at', i, e.message) }
try { await db.childTransaction(() => { for (let j = 0; j < 10; j++) db.put('c'+j, 'y'.repeat(1000)) }); console.log('child ok') } catch (e) { obs(e); console.log('child failed', e.message) }
try { await root.flushed; console.log('flushed ok') } catch (e) { obs(e); console.log('flushed failed', e.message) }
execSync(`mount -o remount,size=20m ${dir}`)
await new Promise((r) => setTimeout(r, 100))
try { await db.put('after', 1); console.log('small put after free ok') } catch (e) { obs(e); console.log('small put failed', e.message) }
try { await db.childTransaction(() => { for (let j = 0; j < 100; j++) db.put('d'+j, 'y'.repeat(1000)) }); console.log('child after free ok') } catch (e) { obs(e); console.log('child failed', e.message) }
console.log('read', db.get(0)?.length, db.get('after'), db.get('d5')?.length, db.get(i-1)?.length, db.get(i))
await root.close()
console.log('closed')
