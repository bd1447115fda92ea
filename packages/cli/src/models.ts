import { createScriptedProvider, loadScriptFile, type RoleModels } from '@polish/agents';
import { PolishError } from '@polish/protocol';
import { InputError } from './input-error.js';

/** The model flags of `polish run` and `polish worker`. */
export interface ModelFlags {
  provider?: string;
  script?: string;
}

/** Builds the models the agents use from the flags; bad flags throw an InputError. */
export function resolveModels(flags: ModelFlags): RoleModels {
  const provider = flags.provider ?? 'scripted';
  if (provider !== 'scripted') throw new InputError('provider', `unknown provider "${provider}" (available: scripted)`);
  if (!flags.script) throw new InputError('script', 'required with --provider scripted: pass --script answers.yaml');
  try {
    return createScriptedProvider(loadScriptFile(flags.script));
  } catch (error) {
    if (error instanceof PolishError) throw new InputError('script', error.message.replace(/^script: /, ''));
    throw error;
  }
}
