// Text normalisation shared by the hashed embedder and the keyword index.
import t from 'tap'
import { analyze, normalize, stem, STOPWORDS, tokenize } from '../../src/memory/text-features.js'

t.test('identifiers are kept whole and also yield their parts', async (t) => {
  const cases: Array<[string, string[]]> = [
    ['INV-2024-0042', ['inv-2024-0042', 'inv', '2024', '0042']],
    ['user_id', ['user_id', 'user', 'id']],
    ['v2.3.1', ['v2.3.1', 'v2', '3', '1']],
    ['foo@bar.com', ['foo@bar.com', 'foo', 'bar', 'com']],
    ['/etc/hosts', ['/etc/hosts', 'etc', 'host']],
    ['.eslintrc.json', ['.eslintrc.json', 'eslintrc', 'json']],
    ['userId', ['userid', 'user', 'id']],
    ['HTTPServer', ['httpserver', 'http', 'server']],
    ['42', ['42']],
    ['$1,200', ['1200']],
  ]
  for (const [text, want] of cases) t.same(tokenize(text), want, text)
  t.same(
    analyze('see user_id').map((x) => x.kind),
    ['word', 'identifier', 'part', 'part'],
  )
})

t.test('lower case, NFKC, apostrophes, stopwords', async (t) => {
  t.same(tokenize('The INVOICE was paid LATE.'), ['invoic', 'pay', 'lat'])
  t.same(tokenize('Ｆｕｌｌｗｉｄｔｈ ﬁle'), ['fullwidth', 'fil'], 'NFKC folds compatibility forms')
  t.equal(normalize('don’t'), 'dont')
  t.same(tokenize("the user's cat"), ['user', 'cat'])
  t.same(tokenize('it is what it is, and so on'), [])
  t.same(tokenize(''), [])
  t.ok(tokenize('not no never').includes('not'), 'negations are kept')
  t.ok(STOPWORDS.has('the') && !STOPWORDS.has('id') && !STOPWORDS.has('may'))
  t.same(tokenize('東京タワー'), ['東京タワー', '東京', '京タ', 'タワ', 'ワー'], 'unspaced scripts also yield character pairs')
  t.same(tokenize('café naïve'), ['café', 'naïve'])
})

t.test('the stemmer joins common word forms and leaves short or odd words alone', async (t) => {
  const same: string[][] = [
    ['invoice', 'invoices'],
    ['pay', 'pays', 'paying', 'paid'],
    ['run', 'running', 'runs', 'ran'],
    ['date', 'dates', 'dated'],
    ['use', 'used', 'using', 'uses'],
    ['reply', 'replies', 'replied'],
    ['stop', 'stopped', 'stopping'],
    ['cache', 'caches', 'cached', 'caching'],
    ['class', 'classes'],
    ['month', 'monthly'],
    ['child', 'children'],
    ['box', 'boxes'],
    ['add', 'added', 'adding'],
    ['supply', 'supplies', 'supplied'],
    ['family', 'families'],
    ['party', 'parties'],
  ]
  for (const group of same) t.equal(new Set(group.map(stem)).size, 1, `${group.join(' ')} → ${group.map(stem).join(' ')}`)
  for (const w of ['bus', 'status', 'analysis', 'thing', 'string', 'need', 'k8s', 'v2', 'ünï']) {
    t.equal(stem(w), w, `${w} unchanged`)
  }
})
