/**
 * Splits long texts into overlapping passages for indexing, so an exact identifier in
 * the middle of a long tool result is found with its own surroundings, and embeddings
 * describe one topic rather than a whole document. Breaks at paragraph, sentence or
 * word boundaries where it can.
 */
export function splitPassages(text: string, maxChars = 800, overlap = 120): string[] {
  const clean = text.replace(/\r\n/g, '\n').trim()
  if (clean.length === 0) return []
  if (clean.length <= maxChars) return [clean]
  const out: string[] = []
  let start = 0
  while (start < clean.length) {
    let end = Math.min(clean.length, start + maxChars)
    if (end < clean.length) {
      const window = clean.slice(start, end)
      const cut = Math.max(window.lastIndexOf('\n\n'), window.lastIndexOf('. '), window.lastIndexOf('\n'))
      if (cut > maxChars * 0.5) end = start + cut + 1
      else {
        const space = window.lastIndexOf(' ')
        if (space > maxChars * 0.5) end = start + space
      }
    }
    const piece = clean.slice(start, end).trim()
    if (piece) out.push(piece)
    if (end >= clean.length) break
    // Step back by the overlap, to a word boundary, so context carries across passages.
    let next = Math.max(start + 1, end - overlap)
    const space = clean.indexOf(' ', next)
    if (space !== -1 && space < end) next = space + 1
    start = next
  }
  return out
}
