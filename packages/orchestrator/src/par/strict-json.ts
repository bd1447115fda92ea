// Policy and checkpoint files are strict JSON, as the agent-collab harness reads them: a key
// given twice in one object is an error, where JSON.parse would silently keep the last one (and
// a signed record could then be read two ways).

/** The first key that appears twice in one object of a JSON text, or undefined. The text must be valid JSON. */
export function duplicateKey(text: string): string | undefined {
  // One set of keys per open object; arrays push null so that a string inside them is no key.
  const open: (Set<string> | null)[] = [];
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index];
    if (char === '{') open.push(new Set());
    else if (char === '[') open.push(null);
    else if (char === '}' || char === ']') open.pop();
    else if (char === '"') {
      let end = index + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      const keys = open.at(-1);
      let next = end + 1;
      while (/\s/.test(text[next] ?? '')) next += 1;
      if (keys && text[next] === ':') {
        const key = JSON.parse(text.slice(index, end + 1)) as string;
        if (keys.has(key)) return key;
        keys.add(key);
      }
      index = end;
    }
  }
  return undefined;
}

/** Parses strict JSON: throws an Error naming the problem (not JSON, or a duplicate key). */
export function parseStrictJson(text: string): unknown {
  const value: unknown = JSON.parse(text);
  const duplicate = duplicateKey(text);
  if (duplicate !== undefined) throw new Error(`duplicate JSON key: ${duplicate}`);
  return value;
}
