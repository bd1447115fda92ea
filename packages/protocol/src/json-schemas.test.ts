import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { renderJsonSchemas } from './json-schemas.js';

const directory = fileURLToPath(new URL('../schema/', import.meta.url));

describe('checked-in JSON Schema files', () => {
  const rendered = renderJsonSchemas();

  it('are exactly the files the zod schemas generate (run `pnpm schemas` after changing a schema)', () => {
    expect(readdirSync(directory).sort()).toEqual(Object.keys(rendered).sort());
    for (const [name, text] of Object.entries(rendered)) {
      expect(readFileSync(`${directory}${name}`, 'utf8'), name).toBe(text);
    }
  });

  it('describe the strict evaluate payload: exactly artifact and criteria', () => {
    const schema = JSON.parse(rendered['payload.evaluate.schema.json'] ?? '{}');
    expect(Object.keys(schema.properties).sort()).toEqual(['artifact', 'criteria']);
    expect(schema.additionalProperties).toBe(false);
  });
});
