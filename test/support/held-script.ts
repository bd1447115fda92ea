import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadScriptFile } from '@polish/agents';

/**
 * A copy of a script whose evaluate answers are held until the test calls `release()`, so a
 * test can act while a worker holds an evaluate task, with no race against the "model".
 */
export function heldScript(source: string, folder: string): { script: string; release: () => void } {
  const script = loadScriptFile(source);
  const id = randomUUID();
  const path = join(folder, `held-${id}.json`);
  const releaseFile = join(folder, `release-${id}`);
  writeFileSync(
    path,
    JSON.stringify({
      ...script,
      evaluate: script.evaluate?.map((rule) => ({ ...rule, hold_until_file: releaseFile })),
    }),
  );
  return { script: path, release: () => writeFileSync(releaseFile, '') };
}
