// Writes packages/protocol/schema/*.json from the zod schemas (`pnpm schemas`).
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderJsonSchemas } from './json-schemas.js';

const directory = fileURLToPath(new URL('../schema/', import.meta.url));
mkdirSync(directory, { recursive: true });
for (const stale of readdirSync(directory)) rmSync(new URL(stale, `file://${directory}`));
const files = renderJsonSchemas();
for (const [name, text] of Object.entries(files)) writeFileSync(`${directory}${name}`, text);
console.log(`wrote ${Object.keys(files).length} JSON Schema files to ${directory}`);
