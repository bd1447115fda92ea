import { loadScriptFile, type ModelSettings } from '@polish/agents';
import { PolishError } from '@polish/protocol';
import { InputError } from './input-error.js';

/** The model flags of `polish run` and `polish worker`. */
export interface ModelFlags {
  provider?: string;
  script?: string;
}

/**
 * Model settings for workers from the flags. The script is loaded once here so a bad one is
 * reported as invalid input before anything starts.
 */
export function resolveModelSettings(flags: ModelFlags): ModelSettings {
  const provider = flags.provider ?? 'scripted';
  if (provider !== 'scripted') throw new InputError('provider', `unknown provider "${provider}" (available: scripted)`);
  if (!flags.script) throw new InputError('script', 'required with --provider scripted: pass --script answers.yaml');
  try {
    loadScriptFile(flags.script);
  } catch (error) {
    if (error instanceof PolishError) throw new InputError('script', error.message.replace(/^script: /, ''));
    throw error;
  }
  return { provider: 'scripted', script: flags.script };
}
