/**
 * Text normalisation shared by the offline embedder and the keyword index, so both
 * see the same words: Unicode NFKC, lower case, word tokens that keep identifiers
 * whole (`INV-2024-0042`, `user_id`, `v2.3.1`, `foo@bar.com`, `/etc/hosts`) while
 * also yielding their parts, English stopwords dropped, and a light stemmer.
 * Changing anything here changes stored keyword postings and hashed vectors: bump the
 * hashed embedder's version (and re-index) with it.
 */

/** One term of a text, in order. */
export interface Term {
  /** The indexed form: stemmed for words and parts, verbatim (lower-cased) for identifiers. */
  text: string
  /** `word`: a plain word; `identifier`: a compound token kept whole; `part`: a piece of the preceding identifier. */
  kind: 'word' | 'identifier' | 'part'
}

/**
 * A token: letters/digits, optionally joined by connector runs (`-_.@/:+#~\`), with an
 * optional leading `/`, `.`, `~`, `#` or `@` (paths, dotfiles, handles, tags).
 */
const TOKEN = /[/.~#@]?[\p{L}\p{M}\p{N}]+(?:[-_.@/:+#~\\]+[\p{L}\p{M}\p{N}]+)*/gu
const CONNECTOR = /[-_.@/:+#~\\]+/
const LEAD = /^[/.~#@]/
/** Lower→upper case change inside a word (camelCase), split before lower-casing. */
const CAMEL = /(?<=[\p{Ll}\p{N}])(?=\p{Lu})|(?<=\p{Lu})(?=\p{Lu}\p{Ll})/u
const THOUSANDS = /(?<=\d),(?=\d{3}\b)/g
const APOSTROPHE = /(?<=[\p{L}\p{N}])['’‘ʼ](?=[\p{L}])/gu

/** NFKC and apostrophes folded (`don't` → `dont`, `user's` → `users`); case is kept (camelCase). */
export function normalize(text: string): string {
  return text.normalize('NFKC').replace(APOSTROPHE, '').replace(THOUSANDS, '')
}

/** Terms of a text, in order: each plain word once; each identifier whole, then its parts. */
export function analyze(text: string): Term[] {
  const out: Term[] = []
  for (const m of normalize(text).matchAll(TOKEN)) {
    const raw = m[0]
    if (!LEAD.test(raw) && !CONNECTOR.test(raw) && !CAMEL.test(raw)) {
      const w = raw.toLowerCase()
      if (STOPWORDS.has(w)) continue
      out.push({ text: stem(w), kind: 'word' })
      if (w.length > 2 && UNSPACED.test(w)) pushBigrams(w, out)
      continue
    }
    const whole = raw.toLowerCase()
    out.push({ text: whole, kind: 'identifier' })
    for (const piece of raw.split(CONNECTOR)) {
      for (const p of piece.split(CAMEL)) {
        const w = p.toLowerCase()
        if (w === '' || STOPWORDS.has(w) || w === whole) continue
        out.push({ text: stem(w), kind: 'part' })
      }
    }
  }
  return out
}

/** Scripts written without spaces (Han, kana, Thai...): a run also yields its character pairs. */
const UNSPACED = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}]/u

function pushBigrams(w: string, out: Term[]): void {
  const chars = [...w]
  for (let i = 0; i + 1 < chars.length; i++) out.push({ text: chars[i]! + chars[i + 1]!, kind: 'part' })
}

/** Keyword-index terms: stemmed words without stopwords, identifiers whole and their parts. */
export function tokenize(text: string): string[] {
  return analyze(text).map((t) => t.text)
}

const VOWEL = /[aeiouy]/

/**
 * A conservative suffix stripper for English (Porter's step 1 in spirit, plus `-ly` and a
 * final silent `e`), so word forms meet: `invoices`/`invoice` → `invoic`, `pays`/`paying`
 * → `pay`, `running` → `run`, `dated`/`date` → `dat`, `used`/`using` → `use`, `quickly` →
 * `quick`, `replies`/`replied`/`reply` → `repli`. Words of three letters or fewer, and
 * anything with a digit or a non-ASCII letter, are left alone. Common irregular forms map
 * to their base word first (`paid` → `pay`, `children` → `child`).
 */
export function stem(word: string): string {
  return IRREGULAR.get(word) ?? stripSuffixes(word)
}

function stripSuffixes(word: string): string {
  if (word.length <= 3 || !/^[a-z]+$/.test(word)) return word
  let w = word
  if (w.endsWith('sses')) w = w.slice(0, -2)
  else if (w.endsWith('ies') && w.length > 4) w = w.slice(0, -2)
  else if (w.endsWith('s') && !/(?:ss|us|is)$/.test(w)) w = w.slice(0, -1)
  const suffix = w.endsWith('ing') ? 3 : w.endsWith('ed') && !w.endsWith('eed') ? 2 : 0
  if (suffix > 0) {
    const base = w.slice(0, -suffix)
    if (base.length >= 3 && VOWEL.test(base)) {
      w = base.length >= 4 && /([bcdfgkmnprt])\1$/.test(base) ? base.slice(0, -1) : base
    } else if (base.length === 2 && /^[a-z]*[aeiou][a-z]*[^aeiouy]$/.test(base)) {
      w = base + 'e' // used, using → use; aged → age
    }
  }
  if (w.endsWith('ly') && w.length >= 6 && !/[pbi]ly$/.test(w)) w = w.slice(0, -2)
  if (w.length > 3 && /[^aeiou]y$/.test(w)) w = w.slice(0, -1) + 'i'
  if (w.length > 3 && w.endsWith('e') && !w.endsWith('ee')) w = w.slice(0, -1)
  return w
}

/** Common English function words, dropped from indexing (negations kept: they change meaning). */
export const STOPWORDS: ReadonlySet<string> = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being below between ' +
    'both but by can could did do does doing down during each few for from further had has have having he her ' +
    'here hers herself him himself his how i if in into is it its itself just me more most my myself now of off ' +
    'on once only or other our ours ourselves out over own same she should so some such than that the their ' +
    'theirs them themselves then there these they this those through to too under until up very was we were ' +
    'what when where which while who whom why will with would you your yours yourself yourselves ' +
    'im ive youre youve youll youd hes shes its were weve well theyre theyve thats whats lets also might must ' +
    'shall us via per yet ever every much many'
  ).split(' '),
)

/** Irregular verb and plural forms (unambiguous ones only: not `left`, `found`, `saw`...). */
const IRREGULAR: ReadonlyMap<string, string> = new Map(
  (
    'paid:pay bought:buy sent:send spent:spend built:build sold:sell told:tell said:say thought:think ' +
    'brought:bring caught:catch taught:teach sought:seek went:go gone:go ran:run began:begin begun:begin ' +
    'broke:break broken:break chose:choose chosen:choose wrote:write written:write drove:drive driven:drive ' +
    'ate:eat eaten:eat gave:give given:give took:take taken:take knew:know known:know grew:grow grown:grow ' +
    'threw:throw thrown:throw flew:fly flown:fly forgot:forget forgotten:forget got:get gotten:get held:hold ' +
    'kept:keep slept:sleep lost:lose met:meet made:make understood:understand stood:stand spoke:speak ' +
    'spoken:speak stole:steal stolen:steal woke:wake woken:wake wore:wear worn:wear won:win hid:hide hidden:hide ' +
    'rode:ride ridden:ride sang:sing sung:sing swam:swim fell:fall fallen:fall felt:feel sat:sit led:lead ' +
    'shot:shoot hung:hang dug:dig struck:strike lent:lend meant:mean dealt:deal heard:hear bent:bend ' +
    'shook:shake shaken:shake drew:draw drawn:draw froze:freeze frozen:freeze children:child men:man ' +
    'women:woman mice:mouse feet:foot teeth:tooth people:person'
  )
    .split(' ')
    .map((pair) => {
      const [form, base] = pair.split(':') as [string, string]
      return [form, stripSuffixes(base)]
    }),
)

/**
 * The terms a query means literally: identifier-like tokens — a ticket id, version, host,
 * commit hash, path, e-mail, snake_case name, `#tag` — in their indexed (lower-cased, whole)
 * form. Passages holding all of them are the exact matches hybrid search puts first.
 * Capitalised words are never exact terms: in conversation they are mostly names of people
 * and places (every turn carries its speaker's), and ranking them "exact first" would let a
 * name outrank the answer.
 */
export function exactTerms(text: string): string[] {
  const out = new Set<string>()
  for (const m of normalize(text).matchAll(TOKEN)) {
    if (identifierLike(m[0])) out.add(m[0].toLowerCase())
  }
  return [...out]
}

/**
 * Whether a token is an identifier rather than a word: it has a digit (`a1b2c3d`, `v2.3.1`,
 * `INV-2024-0042`; not a bare number of up to four digits, `3rd` or `1990s` — years, counts and
 * ordinals are everywhere),
 * an underscore, a path or handle shape (`/etc/hosts`, `~/x`, `#123`, `a@b.com`), dotted parts
 * of two or more letters (`node.js`, `db.internal`; not `e.g`) or a hyphenated part in capitals
 * (`SUP-X`). A hyphenated plain word (`follow-up`) is a word.
 */
export function identifierLike(raw: string): boolean {
  const alnum = raw.replace(/[^\p{L}\p{N}]/gu, '')
  if (alnum.length < 3) return false
  if (/\d/.test(raw)) return !/^\d{1,4}(?:st|nd|rd|th|s)?$/i.test(raw)
  if (/[_@\\]/.test(raw) || /^[/~#]/.test(raw) || /[\p{L}\p{N}][/:][\p{L}\p{N}]/u.test(raw)) return true
  if (raw.includes('.')) return raw.split('.').every((p) => /^[\p{L}\p{N}-]{2,}$/u.test(p))
  if (raw.includes('-')) return raw.split('-').some((p) => /^\p{Lu}{2,}$/u.test(p))
  return false
}
